// The r* calls: find the file behind the fd (file.h), and for the socket
// calls the socket; check what rdma-core checks (and the pointers it would
// crash on), and hand over.
#include "rsocket/calls.h"

#include <netinet/in.h>
#include <infiniband/ib.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include <cstring>
#include <vector>

#include "rsocket/datagram.h"
#include "rsocket/repoll.h"
#include "rsocket/socket.h"
#include "rsocket/stream.h"
#include "rsocket/table.h"

namespace rdmacm::rsocket {
namespace {

bool iov_valid(const iovec* iov, int iovcnt) { return iovcnt >= 0 && (iov || !iovcnt) && iovcnt <= IOV_MAX; }

}  // namespace

int socket(int domain, int type, int protocol) {
  if ((domain != AF_INET && domain != AF_INET6 && domain != AF_IB) ||
      (type != SOCK_STREAM && type != SOCK_DGRAM) ||
      (type == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
      (type == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
    return -ENOTSUP;
  int err = 0;
  if (type == SOCK_DGRAM) {
    DatagramSocket* d = DatagramSocket::create(domain, &err);
    return d ? d->fd() : err;
  }
  StreamSocket* s = StreamSocket::create(domain, &err);
  return s ? s->fd() : err;
}

namespace {

// The socket behind fd; else -EBADF in *err if fd is none of the wing's, or
// not_socket if it is a file that is not a socket (a repoll set: ENOTSOCK,
// as for a kernel epoll fd; EINVAL for the riomap calls, as rdma-core's
// answer for a socket without them).
Socket* lookup(int fd, int not_socket, int* err) {
  File* f = find_file(fd);
  Socket* s = socket_of(f);
  if (!s) *err = f ? not_socket : -EBADF;
  return s;
}

}  // namespace

#define WITH_SOCKET_OR(fd, not_socket, expr)      \
  do {                                            \
    int err_;                                     \
    Socket* s = lookup(fd, not_socket, &err_);    \
    if (!s) return err_;                          \
    return expr;                                  \
  } while (0)
#define WITH_SOCKET(fd, expr) WITH_SOCKET_OR(fd, -ENOTSOCK, expr)
#define WITH_FILE(fd, expr)      \
  do {                           \
    File* f = find_file(fd);     \
    if (!f) return -EBADF;       \
    return expr;                 \
  } while (0)

int bind(int fd, const sockaddr* addr, socklen_t len) { WITH_SOCKET(fd, s->bind(addr, len)); }
int listen(int fd, int backlog) { WITH_SOCKET(fd, s->listen(backlog)); }
int accept(int fd, sockaddr* addr, socklen_t* len) { WITH_SOCKET(fd, s->accept(addr, len)); }
int connect(int fd, const sockaddr* addr, socklen_t len) { WITH_SOCKET(fd, s->connect(addr, len)); }
int shutdown(int fd, int how) { WITH_SOCKET(fd, s->shutdown(how)); }
ssize_t recv(int fd, void* buf, size_t len, int flags) { WITH_SOCKET(fd, s->recv(buf, len, flags)); }
ssize_t send(int fd, const void* buf, size_t len, int flags) {
  WITH_SOCKET(fd, s->sent(s->send(buf, len, flags)));
}
int getpeername(int fd, sockaddr* addr, socklen_t* len) { WITH_SOCKET(fd, s->peer_name(addr, len)); }
int getsockname(int fd, sockaddr* addr, socklen_t* len) { WITH_SOCKET(fd, s->sock_name(addr, len)); }
int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  WITH_SOCKET(fd, s->set_option(level, name, value, len));
}
int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  WITH_SOCKET(fd, s->get_option(level, name, value, len));
}
off_t iomap(int fd, void* buf, size_t len, int prot, int flags, off_t offset) {
  WITH_SOCKET_OR(fd, -EINVAL, s->iomap(buf, len, prot, flags, offset));
}
int iounmap(int fd, void* buf, size_t len) { WITH_SOCKET_OR(fd, -EINVAL, s->iounmap(buf, len)); }
ssize_t iowrite(int fd, const void* buf, size_t len, off_t offset, int flags) {
  WITH_SOCKET_OR(fd, -EINVAL, s->sent(s->iowrite(buf, len, offset, flags)));
}
int get_flags(int fd) { WITH_FILE(fd, f->flags()); }
int set_flags(int fd, int flags) { WITH_FILE(fd, f->set_flags(flags)); }

// As close(2): the fd leaves the table and every repoll set, then the file
// is released.
int close(int fd) {
  File* f = find_file(fd);
  if (!f) return -EBADF;
  remove_file(fd);
  if (Socket* s = socket_of(f)) repoll_forget(s);
  f->release(std::unique_ptr<File>(f));
  return 0;
}

ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* src, socklen_t* src_len) {
  WITH_SOCKET(fd, s->recv_from(buf, len, flags, src, src_len));
}

// A datagram socket's vector is one message: gathered into (or scattered
// from) one buffer of a datagram's largest size.
namespace {

constexpr size_t kMaxMessage = 65536;

size_t iov_total(const iovec* iov, int iovcnt) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  return total;
}

ssize_t send_message(Socket* s, const iovec* iov, int iovcnt, int flags) {
  size_t total = iov_total(iov, iovcnt);
  if (total > kMaxMessage) return -EMSGSIZE;
  std::vector<uint8_t> buf(total);
  size_t at = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (!iov[i].iov_len) continue;
    if (!iov[i].iov_base) return -EFAULT;
    std::memcpy(buf.data() + at, iov[i].iov_base, iov[i].iov_len);
    at += iov[i].iov_len;
  }
  return s->sent(s->send(buf.data(), total, flags));
}

ssize_t recv_message(Socket* s, const iovec* iov, int iovcnt, int flags, sockaddr* src = nullptr,
                     socklen_t* src_len = nullptr) {
  std::vector<uint8_t> buf(std::min(iov_total(iov, iovcnt), kMaxMessage));
  ssize_t n = s->recv_from(buf.data(), buf.size(), flags, src, src_len);
  if (n <= 0) return n;
  size_t at = 0;
  for (int i = 0; i < iovcnt && at < static_cast<size_t>(n); ++i) {
    size_t chunk = std::min(iov[i].iov_len, static_cast<size_t>(n) - at);
    if (!chunk) continue;
    if (!iov[i].iov_base) return -EFAULT;
    std::memcpy(iov[i].iov_base, buf.data() + at, chunk);
    at += chunk;
  }
  return n;
}

}  // namespace

// Fills the vectors in turn; after the first, only with what is already
// there (rdma-core fills only the first).
ssize_t recvv(int fd, const iovec* iov, int iovcnt, int flags) {
  int err;
  Socket* s = lookup(fd, -ENOTSOCK, &err);
  if (!s && err == -EBADF) return err;
  if (!iov_valid(iov, iovcnt)) return -EINVAL;
  if (!s) return err;
  if (s->message_oriented()) return recv_message(s, iov, iovcnt, flags);
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (!iov[i].iov_len) continue;
    ssize_t n = s->recv(iov[i].iov_base, iov[i].iov_len, total ? flags | MSG_DONTWAIT : flags);
    if (n < 0) return total ? total : n;
    total += n;
    if (static_cast<size_t>(n) < iov[i].iov_len) break;
  }
  return total;
}

ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  if (!msg) return -EFAULT;
  if (msg->msg_control && msg->msg_controllen) return -ENOTSUP;
  Socket* s = find_socket(fd);
  if (s && s->message_oriented() && msg->msg_name) {
    // A datagram's source, as recvmsg(2) gives it (rdma-core leaves it unset).
    int iovcnt = static_cast<int>(msg->msg_iovlen);
    if (!iov_valid(msg->msg_iov, iovcnt)) return -EINVAL;
    return recv_message(s, msg->msg_iov, iovcnt, flags, static_cast<sockaddr*>(msg->msg_name),
                        &msg->msg_namelen);
  }
  return recvv(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* dst,
               socklen_t dst_len) {
  WITH_SOCKET(fd, s->sent(s->send_to(buf, len, flags, dst, dst_len)));
}

ssize_t sendv(int fd, const iovec* iov, int iovcnt, int flags) {
  int err;
  Socket* s = lookup(fd, -ENOTSOCK, &err);
  if (!s && err == -EBADF) return err;
  if (!iov_valid(iov, iovcnt)) return -EINVAL;
  if (!s) return err;
  if (s->message_oriented()) return send_message(s, iov, iovcnt, flags);
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (!iov[i].iov_len) continue;
    ssize_t n = s->sent(s->send(iov[i].iov_base, iov[i].iov_len, flags));
    if (n < 0) return total ? total : n;
    total += n;
    if (static_cast<size_t>(n) < iov[i].iov_len) break;
  }
  return total;
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  if (!msg) return -EFAULT;
  if (msg->msg_control && msg->msg_controllen) return -ENOTSUP;
  return sendv(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

}  // namespace rdmacm::rsocket
