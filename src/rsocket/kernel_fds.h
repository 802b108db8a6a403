// The kernel descriptors rsockets make for themselves (a datagram socket's
// UDP socket and epoll set, repoll's epoll set, the service threads' epoll
// sets), created by system call:
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

// A descriptor of the library's own moved out of the numbers a program
// counts on (kHighFd and up, close-on-exec): netcat 1.10 refuses an
// accepted descriptor above 16, and the library's descriptors come first
// (a service's set is made at the first listen or accept). The descriptor
// itself if it cannot move.
constexpr int kHighFd = 256;
inline int move_high(int fd) {
  if (fd < 0 || fd >= kHighFd) return fd;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, kHighFd);
  if (high < 0) return fd;
  ::close(fd);
  return high;
}

// The service threads' calls on their own set (service_thread.h), by system
// call too: they are the library's, never the application's, so no
// interposer's bookkeeping (or tracing) should see them.
inline int kernel_epoll_ctl(int epfd, int op, int fd, epoll_event* ev) {
  return static_cast<int>(syscall(SYS_epoll_ctl, epfd, op, fd, ev));
}

inline int kernel_epoll_wait(int epfd, epoll_event* events, int max, int ms) {
  return static_cast<int>(syscall(SYS_epoll_pwait, epfd, events, max, ms, nullptr, 0));
}

}  // namespace rdmacm::rsocket
