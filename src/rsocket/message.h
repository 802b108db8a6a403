// The buffers of a sendmsg / recvmsg (msg_iov), as each socket type takes
// them: a stream's in turn, a datagram's as one message. Each hands the
// buffers to the type's per-buffer body; a message of one buffer goes to it
// as it is (rsend, rrecv: no copy, no allocation; and as rdma-core 44's rrecvv,
// which receives into the first buffer only).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace rdmacm::rsocket {

// body(const iovec&, bool first) for each non-empty buffer until one is not
// done whole; first: nothing moved yet. The bytes moved, or the first
// buffer's error.
template <class Body>
ssize_t in_turn(const msghdr& msg, Body body) {
  const iovec* iov = msg.msg_iov;
  if (msg.msg_iovlen == 1) return body(iov[0], true);
  ssize_t total = 0;
  for (size_t i = 0; i < msg.msg_iovlen; ++i) {
    if (!iov[i].iov_len) continue;
    ssize_t n = body(iov[i], total == 0);
    if (n < 0) return total ? total : n;
    total += n;
    if (static_cast<size_t>(n) < iov[i].iov_len) break;
  }
  return total;
}

// A datagram's largest size: a vector is gathered into (or scattered from)
// one buffer of at most this.
inline constexpr size_t kMaxMessage = 65536;

// The bytes the buffers hold in all, or kMaxMessage + 1 once past it (a sum
// of lengths the caller chose may not wrap into a small one).
inline size_t message_total(const msghdr& msg) {
  size_t total = 0;
  for (size_t i = 0; i < msg.msg_iovlen; ++i) {
    if (msg.msg_iov[i].iov_len > kMaxMessage - total) return kMaxMessage + 1;
    total += msg.msg_iov[i].iov_len;
  }
  return total;
}

// body(const void* buf, size_t len) with the buffers gathered into one.
template <class Body>
ssize_t send_as_one(const msghdr& msg, Body body) {
  const iovec* iov = msg.msg_iov;
  if (msg.msg_iovlen == 1) return body(iov[0].iov_base, iov[0].iov_len);
  size_t total = message_total(msg);
  if (total > kMaxMessage) return -EMSGSIZE;
  std::vector<uint8_t> buf(total);
  size_t at = 0;
  for (size_t i = 0; i < msg.msg_iovlen; ++i) {
    if (!iov[i].iov_len) continue;
    if (!iov[i].iov_base) return -EFAULT;
    std::memcpy(buf.data() + at, iov[i].iov_base, iov[i].iov_len);
    at += iov[i].iov_len;
  }
  return body(buf.data(), total);
}

// body(void* buf, size_t len) into one buffer, then scattered.
template <class Body>
ssize_t recv_as_one(const msghdr& msg, Body body) {
  const iovec* iov = msg.msg_iov;
  if (msg.msg_iovlen == 1) return body(iov[0].iov_base, iov[0].iov_len);
  std::vector<uint8_t> buf(std::min(message_total(msg), kMaxMessage));
  ssize_t n = body(buf.data(), buf.size());
  if (n <= 0) return n;
  size_t got = std::min(static_cast<size_t>(n), buf.size());  // n may be the whole (MSG_TRUNC)
  size_t at = 0;
  for (size_t i = 0; i < msg.msg_iovlen && at < got; ++i) {
    size_t chunk = std::min(iov[i].iov_len, got - at);
    if (!chunk) continue;
    if (!iov[i].iov_base) return -EFAULT;
    std::memcpy(iov[i].iov_base, buf.data() + at, chunk);
    at += chunk;
  }
  return n;
}

}  // namespace rdmacm::rsocket
