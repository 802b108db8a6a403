// The r* calls: find the socket behind the fd, check what rdma-core checks
// (and the pointers it would crash on), and hand over to the socket.
#include "rsocket/calls.h"

#include <netinet/in.h>
#include <infiniband/ib.h>

#include <cerrno>
#include <climits>

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
  if (type == SOCK_DGRAM) return -ENOSYS;  // datagram rsockets: not yet
  int err = 0;
  StreamSocket* s = StreamSocket::create(domain, &err);
  return s ? s->fd() : err;
}

#define WITH_SOCKET(fd, expr)              \
  do {                                     \
    Socket* s = find_socket(fd);           \
    if (!s) return -EBADF;                 \
    return expr;                           \
  } while (0)

int bind(int fd, const sockaddr* addr, socklen_t len) { WITH_SOCKET(fd, s->bind(addr, len)); }
int listen(int fd, int backlog) { WITH_SOCKET(fd, s->listen(backlog)); }
int accept(int fd, sockaddr* addr, socklen_t* len) { WITH_SOCKET(fd, s->accept(addr, len)); }
int connect(int fd, const sockaddr* addr, socklen_t len) { WITH_SOCKET(fd, s->connect(addr, len)); }
int shutdown(int fd, int how) { WITH_SOCKET(fd, s->shutdown(how)); }
ssize_t recv(int fd, void* buf, size_t len, int flags) { WITH_SOCKET(fd, s->recv(buf, len, flags)); }
ssize_t send(int fd, const void* buf, size_t len, int flags) {
  WITH_SOCKET(fd, s->send(buf, len, flags));
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
  WITH_SOCKET(fd, s->iomap(buf, len, prot, flags, offset));
}
int iounmap(int fd, void* buf, size_t len) { WITH_SOCKET(fd, s->iounmap(buf, len)); }
ssize_t iowrite(int fd, const void* buf, size_t len, off_t offset, int flags) {
  WITH_SOCKET(fd, s->iowrite(buf, len, offset, flags));
}
int get_flags(int fd) { WITH_SOCKET(fd, s->flags()); }
int set_flags(int fd, int flags) { WITH_SOCKET(fd, s->set_flags(flags)); }

int close(int fd) {
  Socket* s = find_socket(fd);
  if (!s) return -EBADF;
  s->close();
  delete s;
  return 0;
}

ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* src, socklen_t* src_len) {
  Socket* s = find_socket(fd);
  if (!s) return -EBADF;
  ssize_t n = s->recv(buf, len, flags);
  if (n > 0 && src && src_len) s->peer_name(src, src_len);
  return n;
}

// Fills the vectors in turn; after the first, only with what is already
// there (rdma-core fills only the first).
ssize_t recvv(int fd, const iovec* iov, int iovcnt, int flags) {
  Socket* s = find_socket(fd);
  if (!s) return -EBADF;
  if (!iov_valid(iov, iovcnt)) return -EINVAL;
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
  return recvv(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr*, socklen_t) {
  // A connected stream ignores the address, as TCP does.
  return send(fd, buf, len, flags);
}

ssize_t sendv(int fd, const iovec* iov, int iovcnt, int flags) {
  Socket* s = find_socket(fd);
  if (!s) return -EBADF;
  if (!iov_valid(iov, iovcnt)) return -EINVAL;
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (!iov[i].iov_len) continue;
    ssize_t n = s->send(iov[i].iov_base, iov[i].iov_len, flags);
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
