// Datagram rsockets and plain UDP: what kernel UDP would do where the rsocket
// protocol cannot serve.
// - A datagram on the UDP socket without the DsUdpHeader tag is no rsocket's
//   (rdma-core 44 starts every one it sends with the tag): a kernel UDP
//   sender's. The service queues it for the application with its source,
//   as kernel UDP delivers it (rdma-core 44 drops it, and the sender's
//   datagrams vanish). The queue is bounded as the receive buffer is (its
//   bytes, and a datagram per receive slot), past that dropped, as a full
//   UDP socket drops. A datagram whose first four bytes happen to be the
//   tag is taken for the protocol's (rsocket(7), "Datagrams").
// - A destination with no RDMA path is sent to as plain UDP from the UDP
//   socket, so the datagrams reach kernel UDP sockets or rsockets' plain
//   queues there, as the kernel would deliver them: a loopback or wildcard
//   address when no QP can live on loopback (RoCE has no loopback: no GID
//   names 127.0.0.1 or ::1; rdma-core 44: ENODEV), a multicast or the
//   broadcast address (a UD QP of an rsocket joins no group; the UDP socket
//   does, with the options the application set on it), or one we would
//   send to from an address no RDMA device has (rdma-core 44: ENODEV).
// - A peer heard in plain datagrams, and never in the protocol's, with no
//   working binding (the program at the other end is on kernel UDP), is
//   answered in plain datagrams: the protocol's header would reach its
//   program as data. The memory holds the last kMaxPlainPeers such peers.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rsocket/datagram.h"

namespace rdmacm::rsocket {

namespace {

// Sent to over UDP whatever the devices: a multicast or the broadcast
// address (an rsocket's UD QP joins no group; its UDP socket does, with the
// options the application set on it).
bool group4(uint32_t a) { return IN_MULTICAST(a) || a == INADDR_BROADCAST; }
bool loopback4(uint32_t a) { return a == INADDR_ANY || (a >> 24) == IN_LOOPBACKNET; }

uint32_t mapped4(const in6_addr& a) {
  uint32_t v4;
  std::memcpy(&v4, &a.s6_addr[12], 4);
  return ntohl(v4);
}

bool group(const SockAddr& a) {
  if (a.sa.sa_family == AF_INET) return group4(ntohl(a.sin.sin_addr.s_addr));
  const in6_addr& a6 = a.sin6.sin6_addr;
  return IN6_IS_ADDR_MULTICAST(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && group4(mapped4(a6)));
}

bool loopback(const SockAddr& a) {
  if (a.sa.sa_family == AF_INET) return loopback4(ntohl(a.sin.sin_addr.s_addr));
  const in6_addr& a6 = a.sin6.sin6_addr;
  return IN6_IS_ADDR_UNSPECIFIED(&a6) || IN6_IS_ADDR_LOOPBACK(&a6) ||
         (IN6_IS_ADDR_V4MAPPED(&a6) && loopback4(mapped4(a6)));
}

}  // namespace

// The UDP socket's address, bound to a port now if it was not (rdma-core 44
// would name port 0 as the source, which no answer reaches).
int DatagramSocket::bound_name(Addr* name) {
  socklen_t len = sizeof(*name);
  if (::getsockname(fd_, &name->sa, &len)) return -errno;
  if (name->sa.sa_family == AF_INET ? name->sin.sin_port : name->sin6.sin6_port) return 0;
  Addr any{};
  any.sa.sa_family = name->sa.sa_family;
  if (::bind(fd_, &any.sa, sockaddr_len(any.sa.sa_family)) && errno != EINVAL) return -errno;
  len = sizeof(*name);
  return ::getsockname(fd_, &name->sa, &len) ? -errno : 0;
}

bool DatagramSocket::plain_path(const Addr& dst) {
  if (group(dst)) return true;
  if (!loopback(dst)) return false;
  // Loopback: whether a QP can live on the loopback address (on RoCE none
  // can: no GID names 127.0.0.1 or ::1), found once per family.
  int8_t& known = loopback_rdma_[dst.sa.sa_family == AF_INET6];
  if (!known) {
    Addr lo{};
    int err = bound_name(&lo);
    if (!err) {
      Addr key{};
      key.sa.sa_family = dst.sa.sa_family;
      if (key.sa.sa_family == AF_INET) {
        key.sin.sin_port = lo.sin.sin_port;
        key.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      } else {
        key.sin6.sin6_port = lo.sin6.sin6_port;
        key.sin6.sin6_addr = in6addr_loopback;
      }
      LockGuard map(map_mutex_);
      Qp* qp;
      err = get_rdma_qp(key, &qp);
    }
    known = err ? -1 : 1;
  }
  return known < 0;
}

// get_qp, remembering the sources no RDMA device has (no device, or no GID
// for the address): -ENODEV for them at once, with no QP tried again.
int DatagramSocket::get_rdma_qp(const Addr& src, Qp** out) {
  auto same = [&](const Addr& a) { return !std::memcmp(&a, &src, sizeof(a)); };
  if (std::any_of(no_rdma_sources_.begin(), no_rdma_sources_.end(), same)) return -ENODEV;
  int err = get_qp(src, out);
  if (err != -ENODEV && err != -EADDRNOTAVAIL) return err;
  if (no_rdma_sources_.size() == kMaxNoRdmaSources) no_rdma_sources_.erase(no_rdma_sources_.begin());
  no_rdma_sources_.push_back(src);
  return -ENODEV;
}

void DatagramSocket::queue_plain(const Addr& from, socklen_t from_len, const uint8_t* buf,
                                 size_t len) {
  bool woke;
  {
    LockGuard lock(cq_mutex_);
    // The receive buffer's room, as kernel UDP bounds its queue by
    // SO_RCVBUF; an empty queue takes one datagram whatever its size.
    if (!plain_.empty() &&
        (plain_bytes_ + len > sizes_.rbuf_size || plain_.size() >= sizes_.rq_size))
      return;
    Plain p;
    p.from = from;
    p.from_len = from_len;
    p.bytes.assign(buf, buf + len);
    woke = plain_.empty();
    plain_.push_back(std::move(p));
    plain_bytes_ += len;
    auto known = std::find_if(plain_memory_.begin(), plain_memory_.end(), [&](const Addr& a) {
      return !std::memcmp(&a, &from, sizeof(a));
    });
    if (known != plain_memory_.end()) plain_memory_.erase(known);
    if (plain_memory_.size() == kMaxPlainPeers) plain_memory_.pop_front();
    plain_memory_.push_back(from);
    plain_peers_ = plain_memory_.size();
  }
  if (woke) {
    uint64_t one = 1;
    if (::write(wake_fd_, &one, sizeof(one)) < 0) {
      // Only when the counter is full: it is readable already.
    }
  }
}

ssize_t DatagramSocket::take_plain(void* buf, size_t len, int flags, sockaddr* src,
                                   socklen_t* src_len, size_t* whole) {
  Plain& p = plain_.front();
  *whole = p.bytes.size();
  size_t n = std::min(len, p.bytes.size());
  if (n) std::memcpy(buf, p.bytes.data(), n);
  if (src && src_len) {
    std::memcpy(src, &p.from, std::min(*src_len, p.from_len));
    *src_len = p.from_len;
  }
  if (!(flags & MSG_PEEK)) {
    plain_bytes_ -= p.bytes.size();
    plain_.pop_front();
    if (plain_.empty()) {
      uint64_t count;
      if (::read(wake_fd_, &count, sizeof(count)) < 0) {
        // Not readable: a sleeper took it already.
      }
    }
  }
  return static_cast<ssize_t>(flags & MSG_TRUNC ? *whole : n);
}

ssize_t DatagramSocket::send_plain(const void* buf, size_t len, int flags, const sockaddr* dst,
                                   socklen_t dst_len) {
  int pass = flags & (MSG_DONTWAIT | MSG_CONFIRM | MSG_NOSIGNAL);
  if (nonblocking(flags)) pass |= MSG_DONTWAIT;
  ssize_t n = dst ? ::sendto(fd_, buf, len, pass, dst, dst_len) : ::send(fd_, buf, len, pass);
  return n < 0 ? -errno : n;
}

// A peer in the memory whose destination (if any) has no binding: its
// program is on kernel UDP.
bool DatagramSocket::answer_plain(const Addr& a) {
  if (!plain_peers_) return false;
  {
    LockGuard lock(cq_mutex_);
    if (std::none_of(plain_memory_.begin(), plain_memory_.end(),
                     [&](const Addr& p) { return !std::memcmp(&p, &a, sizeof(a)); }))
      return false;
  }
  LockGuard map(map_mutex_);
  const Dest* d = dests_.find(a);
  return !d || !d->binding.bound();
}

void DatagramSocket::forget_plain_peer(const Addr& a) {
  if (!plain_peers_) return;
  LockGuard lock(cq_mutex_);
  auto known = std::find_if(plain_memory_.begin(), plain_memory_.end(),
                            [&](const Addr& p) { return !std::memcmp(&p, &a, sizeof(a)); });
  if (known != plain_memory_.end()) plain_memory_.erase(known);
  plain_peers_ = plain_memory_.size();
}

}  // namespace rdmacm::rsocket
