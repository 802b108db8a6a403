// The r* calls: find the file behind the fd (file.h), and for the socket
// calls the socket; check what rdma-core 44 checks (and the pointers it would
// crash on), and hand over. Every send and receive call is the socket's
// sendmsg or recvmsg (socket.h), as the kernel's.
#include "rsocket/calls.h"

#include <netinet/in.h>
#include <infiniband/ib.h>

#include <cerrno>
#include <climits>

#include "rsocket/datagram.h"
#include "rsocket/repoll.h"
#include "rsocket/socket.h"
#include "rsocket/stream.h"
#include "rsocket/table.h"

namespace rdmacm::rsocket {

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
// as for a kernel epoll fd; EINVAL for the riomap calls, as rdma-core 44's
// answer for a socket without them).
Socket* lookup(int fd, int not_socket, int* err) {
  File* f = find_file(fd);
  Socket* s = socket_of(f);
  if (!s) *err = f ? not_socket : -EBADF;
  return s;
}

// The vector calls' socket, checked in their order: the fd, the vector,
// then that it is a socket.
Socket* lookup_vector(int fd, const iovec* iov, int iovcnt, int* err) {
  Socket* s = lookup(fd, -ENOTSOCK, err);
  if (!s && *err == -EBADF) return nullptr;
  if (iovcnt < 0 || (!iov && iovcnt) || iovcnt > IOV_MAX) {
    *err = -EINVAL;
    return nullptr;
  }
  return s;
}

msghdr message(const iovec* iov, size_t iovcnt) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = iovcnt;
  return m;
}

// Every send call's way out (rsend, rsendto, rwritev, rsendmsg, riowrite):
// one that found no room marks it for repoll's EPOLLET (Socket::sent).
template <class Send>
ssize_t send_on(Socket* s, Send send) {
  return s->sent(send());
}

}  // namespace

#define WITH_SOCKET_OR(fd, not_socket, expr)   \
  do {                                         \
    int err_;                                  \
    Socket* s = lookup(fd, not_socket, &err_); \
    if (!s) return err_;                       \
    return expr;                               \
  } while (0)
#define WITH_SOCKET(fd, expr) WITH_SOCKET_OR(fd, -ENOTSOCK, expr)
#define WITH_FILE(fd, expr)  \
  do {                       \
    File* f = find_file(fd); \
    if (!f) return -EBADF;   \
    return expr;             \
  } while (0)

int bind(int fd, const sockaddr* addr, socklen_t len) { WITH_SOCKET(fd, s->bind(addr, len)); }
int listen(int fd, int backlog) { WITH_SOCKET(fd, s->listen(backlog)); }
int accept(int fd, sockaddr* addr, socklen_t* len) { WITH_SOCKET(fd, s->accept(addr, len)); }
int connect(int fd, const sockaddr* addr, socklen_t len) { WITH_SOCKET(fd, s->connect(addr, len)); }
int shutdown(int fd, int how) { WITH_SOCKET(fd, s->shutdown(how)); }
int getpeername(int fd, sockaddr* addr, socklen_t* len) { WITH_SOCKET(fd, s->peer_name(addr, len)); }
int getsockname(int fd, sockaddr* addr, socklen_t* len) { WITH_SOCKET(fd, s->sock_name(addr, len)); }
int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  WITH_SOCKET(fd, Timeouts::handles(level, name) ? s->timeouts().set(name, value, len)
                                                 : s->set_option(level, name, value, len));
}
int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  WITH_SOCKET(fd, Timeouts::handles(level, name) ? s->timeouts().get(name, value, len)
                                                 : s->get_option(level, name, value, len));
}
off_t iomap(int fd, void* buf, size_t len, int prot, int flags, off_t offset) {
  WITH_SOCKET_OR(fd, -EINVAL, s->iomap(buf, len, prot, flags, offset));
}
int iounmap(int fd, void* buf, size_t len) { WITH_SOCKET_OR(fd, -EINVAL, s->iounmap(buf, len)); }
ssize_t iowrite(int fd, const void* buf, size_t len, off_t offset, int flags) {
  WITH_SOCKET_OR(fd, -EINVAL, send_on(s, [&] { return s->iowrite(buf, len, offset, flags); }));
}
int get_flags(int fd) { WITH_FILE(fd, f->flags()); }
int set_flags(int fd, int flags) { WITH_FILE(fd, f->set_flags(flags)); }

// As close(2): the fd leaves the table and every repoll set, then the file
// is released.
int close(int fd) {
  File* f = find_file(fd);
  if (!f) return -EBADF;
  remove_file(fd);
  repoll_forget(f);
  f->release(std::unique_ptr<File>(f));
  return 0;
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  WITH_SOCKET(fd, send_on(s, [&] { return s->sendmsg(message(&iov, 1), flags); }));
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* dst,
               socklen_t dst_len) {
  iovec iov{const_cast<void*>(buf), len};
  msghdr m = message(&iov, 1);
  m.msg_name = const_cast<sockaddr*>(dst);
  m.msg_namelen = dst_len;
  WITH_SOCKET(fd, send_on(s, [&] { return s->sendmsg(m, flags); }));
}

ssize_t sendv(int fd, const iovec* iov, int iovcnt, int flags) {
  int err;
  Socket* s = lookup_vector(fd, iov, iovcnt, &err);
  if (!s) return err;
  return send_on(s, [&] { return s->sendmsg(message(iov, static_cast<size_t>(iovcnt)), flags); });
}

namespace {

// A message of more buffers than IOV_MAX: EMSGSIZE, as the kernel's
// sendmsg and recvmsg (rdma-core 44 casts the count to int: 1 << 32 buffers
// read as none, end-of-file), once the fd is known to be the wing's.
int too_many_buffers(int fd, const msghdr* msg) {
  if (msg->msg_iovlen <= IOV_MAX) return 0;
  int err;
  return lookup(fd, -ENOTSOCK, &err) ? -EMSGSIZE : err;
}

}  // namespace

// To msg_name, as sendmsg(2): a datagram socket sends there (rdma-core 44's
// ignores it, and fails with EDESTADDRREQ unless connected), a stream
// ignores it as TCP does; a name of length 0 is none, as the kernel's.
ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  if (!msg) return -EFAULT;
  if (int err = too_many_buffers(fd, msg)) return err;
  if (msg->msg_control && msg->msg_controllen) return -ENOTSUP;
  if (!msg->msg_name || !msg->msg_namelen)
    return sendv(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  int err;
  int iovcnt = static_cast<int>(msg->msg_iovlen);
  Socket* s = lookup_vector(fd, msg->msg_iov, iovcnt, &err);
  if (!s) return err;
  msghdr m = message(msg->msg_iov, static_cast<size_t>(iovcnt));
  m.msg_name = msg->msg_name;
  m.msg_namelen = msg->msg_namelen;
  return send_on(s, [&] { return s->sendmsg(m, flags); });
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  msghdr m = message(&iov, 1);
  WITH_SOCKET(fd, s->recvmsg(m, flags));
}

// A stream has no source per message: rdma-core 44's rrecvfrom names its peer.
ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* src, socklen_t* src_len) {
  int err;
  Socket* s = lookup(fd, -ENOTSOCK, &err);
  if (!s) return err;
  iovec iov{buf, len};
  msghdr m = message(&iov, 1);
  m.msg_name = src;
  m.msg_namelen = src_len ? *src_len : 0;
  ssize_t n = s->recvmsg(m, flags);
  if (src_len && m.msg_namelen)
    *src_len = m.msg_namelen;
  else if (n > 0 && src && src_len)
    s->peer_name(src, src_len);
  return n;
}

ssize_t recvv(int fd, const iovec* iov, int iovcnt, int flags) {
  int err;
  Socket* s = lookup_vector(fd, iov, iovcnt, &err);
  if (!s) return err;
  msghdr m = message(iov, static_cast<size_t>(iovcnt));
  return s->recvmsg(m, flags);
}

// A datagram's source in msg_name, as recvmsg(2) gives it (rdma-core 44 leaves
// it unset); a stream leaves msg_name and msg_namelen as they are. msg_flags
// as recvmsg(2)'s (MSG_TRUNC for a datagram cut short); a control buffer is
// given back empty (rdma-core 44: ENOTSUP, which fails every recvmsg that
// offers one, as CPython's socket.recvmsg(n, ancbufsize) does).
ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  if (!msg) return -EFAULT;
  if (int err = too_many_buffers(fd, msg)) return err;
  int err;
  int iovcnt = static_cast<int>(msg->msg_iovlen);  // at most IOV_MAX
  Socket* s = lookup_vector(fd, msg->msg_iov, iovcnt, &err);
  if (!s) return err;
  msghdr m = message(msg->msg_iov, static_cast<size_t>(iovcnt));
  m.msg_name = msg->msg_name;
  m.msg_namelen = msg->msg_name ? msg->msg_namelen : 0;
  ssize_t n = s->recvmsg(m, flags);
  if (msg->msg_name && m.msg_namelen) msg->msg_namelen = m.msg_namelen;
  if (n >= 0) {
    msg->msg_flags = m.msg_flags;
    msg->msg_controllen = 0;  // no ancillary data, as recvmsg(2) says when it has none
  }
  return n;
}

// read(2) and readv(2) of no bytes return 0 at once, as the kernel's
// sock_read_iter (rdma-core 44's wait for data, as a receive does).
ssize_t read(int fd, void* buf, size_t len) {
  if (!len) WITH_SOCKET(fd, 0);
  return recv(fd, buf, len, 0);
}

ssize_t readv(int fd, const iovec* iov, int iovcnt) {
  int err;
  Socket* s = lookup_vector(fd, iov, iovcnt, &err);
  if (!s) return err;
  msghdr m = message(iov, static_cast<size_t>(iovcnt));
  if (!message_total(m)) return 0;
  return s->recvmsg(m, 0);
}

}  // namespace rdmacm::rsocket
