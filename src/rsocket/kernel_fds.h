// The kernel descriptors rsockets make for themselves (a datagram socket's
// UDP socket and epoll set, repoll's epoll set), created by system call:
// under an LD_PRELOAD interposer (librspreload, rdma-core's or ours),
// socket() and epoll_create1() would make another rsocket or repoll set, and
// repoll_create would call itself. Calls on these descriptors once made may
// pass through an interposer: it knows them for ordinary descriptors.
// set_fd_nonblocking: an fd's O_NONBLOCK, 0 or -errno.
#pragma once

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace rdmacm::rsocket {

inline int kernel_udp_socket(int domain, int flags) {
  return static_cast<int>(syscall(SYS_socket, domain, SOCK_DGRAM | flags, 0));
}

inline int set_fd_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -errno;
  flags = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
  return fcntl(fd, F_SETFL, flags) ? -errno : 0;
}

inline int kernel_epoll(int flags = EPOLL_CLOEXEC) {
  return static_cast<int>(syscall(SYS_epoll_create1, flags));
}

}  // namespace rdmacm::rsocket
