// The rsocket family (RDMA sockets): trampolines into the rsocket wing
// (src/rsocket/calls.h, poll.h, repoll.h).
#include <rdma/rsocket.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/epoll.h>

#include "api/entry.h"
#include "rsocket/calls.h"
#include "rsocket/poll.h"
#include "rsocket/repoll.h"

using namespace rdmacm;

RDMACM_EXPORT int rsocket(int domain, int type, int protocol) {
  return api::call([&] { return rsocket::socket(domain, type, protocol); });
}
RDMACM_EXPORT int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  return api::call([&] { return rsocket::bind(socket, addr, addrlen); });
}
RDMACM_EXPORT int rlisten(int socket, int backlog) {
  return api::call([&] { return rsocket::listen(socket, backlog); });
}
RDMACM_EXPORT int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  return api::call([&] { return rsocket::accept(socket, addr, addrlen); });
}
RDMACM_EXPORT int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  return api::call([&] { return rsocket::connect(socket, addr, addrlen); });
}
RDMACM_EXPORT int rshutdown(int socket, int how) {
  return api::call([&] { return rsocket::shutdown(socket, how); });
}
RDMACM_EXPORT int rclose(int socket) {
  return api::call([&] { return rsocket::close(socket); });
}
RDMACM_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  return api::call_ssize([&] { return rsocket::recv(socket, buf, len, flags); });
}
RDMACM_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr,
                                socklen_t* addrlen) {
  return api::call_ssize(
      [&] { return rsocket::recvfrom(socket, buf, len, flags, src_addr, addrlen); });
}
RDMACM_EXPORT ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  return api::call_ssize([&] { return rsocket::recvmsg(socket, msg, flags); });
}
RDMACM_EXPORT ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  return api::call_ssize([&] { return rsocket::send(socket, buf, len, flags); });
}
RDMACM_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len, int flags,
                              const sockaddr* dest_addr, socklen_t addrlen) {
  return api::call_ssize(
      [&] { return rsocket::sendto(socket, buf, len, flags, dest_addr, addrlen); });
}
RDMACM_EXPORT ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  return api::call_ssize([&] { return rsocket::sendmsg(socket, msg, flags); });
}
RDMACM_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
  return api::call_ssize([&] { return rsocket::read(socket, buf, count); });
}
RDMACM_EXPORT ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  return api::call_ssize([&] { return rsocket::readv(socket, iov, iovcnt); });
}
RDMACM_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  return api::call_ssize([&] { return rsocket::send(socket, buf, count, 0); });
}
RDMACM_EXPORT ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  return api::call_ssize([&] { return rsocket::sendv(socket, iov, iovcnt, 0); });
}
RDMACM_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  return api::call([&] { return rsocket::poll(fds, nfds, timeout); });
}
RDMACM_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                          timeval* timeout) {
  return api::call(
      [&] { return rsocket::select(nfds, readfds, writefds, exceptfds, timeout); });
}
RDMACM_EXPORT int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  return api::call([&] { return rsocket::getpeername(socket, addr, addrlen); });
}
RDMACM_EXPORT int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  return api::call([&] { return rsocket::getsockname(socket, addr, addrlen); });
}
RDMACM_EXPORT int rsetsockopt(int socket, int level, int optname, const void* optval,
                              socklen_t optlen) {
  return api::call([&] { return rsocket::setsockopt(socket, level, optname, optval, optlen); });
}
RDMACM_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval,
                              socklen_t* optlen) {
  return api::call([&] { return rsocket::getsockopt(socket, level, optname, optval, optlen); });
}
RDMACM_EXPORT int rfcntl(int socket, int cmd, ...) {
  va_list args;
  va_start(args, cmd);
  int arg = cmd == F_SETFL ? va_arg(args, int) : 0;
  va_end(args);
  return api::call([&] {
    if (cmd == F_GETFL) return rsocket::get_flags(socket);
    if (cmd == F_SETFL) return rsocket::set_flags(socket, arg);
    return -ENOTSUP;  // as rdma-core
  });
}
RDMACM_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  return api::call_ssize([&] { return rsocket::iomap(socket, buf, len, prot, flags, offset); });
}
RDMACM_EXPORT int riounmap(int socket, void* buf, size_t len) {
  return api::call([&] { return rsocket::iounmap(socket, buf, len); });
}
// size_t, as rdma-core declares it: (size_t)-1 with errno on failure.
RDMACM_EXPORT size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  return static_cast<size_t>(
      api::call_ssize([&] { return rsocket::iowrite(socket, buf, count, offset, flags); }));
}
RDMACM_EXPORT int repoll_create(int flags) {
  return api::call([&] { return rsocket::repoll_create(flags); });
}
RDMACM_EXPORT int repoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  return api::call([&] { return rsocket::repoll_ctl(epfd, op, fd, event); });
}
RDMACM_EXPORT int repoll_wait(int epfd, epoll_event* events, int maxevents, int timeout) {
  return api::call([&] { return rsocket::repoll_wait(epfd, events, maxevents, timeout); });
}
