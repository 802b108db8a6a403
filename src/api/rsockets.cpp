// The rsocket family (RDMA sockets) and repoll: not implemented yet.
#include <rdma/rsocket.h>
#include <sys/epoll.h>

#include "api/entry.h"

using namespace rdmacm;

namespace {
ssize_t unsupported() { return api::not_implemented(); }
}  // namespace

RDMACM_EXPORT int rsocket(int, int, int) { return api::not_implemented(); }
RDMACM_EXPORT int rbind(int, const sockaddr*, socklen_t) { return api::not_implemented(); }
RDMACM_EXPORT int rlisten(int, int) { return api::not_implemented(); }
RDMACM_EXPORT int raccept(int, sockaddr*, socklen_t*) { return api::not_implemented(); }
RDMACM_EXPORT int rconnect(int, const sockaddr*, socklen_t) { return api::not_implemented(); }
RDMACM_EXPORT int rshutdown(int, int) { return api::not_implemented(); }
RDMACM_EXPORT int rclose(int) { return api::not_implemented(); }
RDMACM_EXPORT ssize_t rrecv(int, void*, size_t, int) { return unsupported(); }
RDMACM_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) { return unsupported(); }
RDMACM_EXPORT ssize_t rrecvmsg(int, msghdr*, int) { return unsupported(); }
RDMACM_EXPORT ssize_t rsend(int, const void*, size_t, int) { return unsupported(); }
RDMACM_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) { return unsupported(); }
RDMACM_EXPORT ssize_t rsendmsg(int, const msghdr*, int) { return unsupported(); }
RDMACM_EXPORT ssize_t rread(int, void*, size_t) { return unsupported(); }
RDMACM_EXPORT ssize_t rreadv(int, const iovec*, int) { return unsupported(); }
RDMACM_EXPORT ssize_t rwrite(int, const void*, size_t) { return unsupported(); }
RDMACM_EXPORT ssize_t rwritev(int, const iovec*, int) { return unsupported(); }
RDMACM_EXPORT int rpoll(pollfd*, nfds_t, int) { return api::not_implemented(); }
RDMACM_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return api::not_implemented(); }
RDMACM_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) { return api::not_implemented(); }
RDMACM_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) { return api::not_implemented(); }
RDMACM_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return api::not_implemented(); }
RDMACM_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return api::not_implemented(); }
RDMACM_EXPORT int rfcntl(int, int, ...) { return api::not_implemented(); }
RDMACM_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return api::not_implemented(); }
RDMACM_EXPORT int riounmap(int, void*, size_t) { return api::not_implemented(); }
RDMACM_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  api::not_implemented();
  return 0;
}
RDMACM_EXPORT int repoll_create(int) { return api::not_implemented(); }
RDMACM_EXPORT int repoll_ctl(int, int, int, epoll_event*) { return api::not_implemented(); }
RDMACM_EXPORT int repoll_wait(int, epoll_event*, int, int) { return api::not_implemented(); }
