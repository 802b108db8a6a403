// What every interposing file shares: the export marker, errno helpers and
// the descriptor a new placeholder is made with.
#pragma once

#include <errno.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <sys/socket.h>

#include "fd_map.h"
#include "real_calls.h"

#define RSPRELOAD_EXPORT extern "C" __attribute__((visibility("default")))

namespace rspreload {

inline int fail(int err) {
  errno = err;
  return -1;
}

// The kernel socket that stands for an rsocket of `domain` and `type`
// (AF_IB has no kernel sockets: an AF_INET6 one stands in).
inline int make_placeholder(int domain, int type) {
  return real::socket(domain == AF_IB ? AF_INET6 : domain, type, 0);
}

// Maps placeholder `fd` to librdmacm descriptor `rfd` (an rsocket or a repoll
// set); on failure `rfd` is closed and false returned (the placeholder stays
// a plain kernel descriptor).
bool adopt(int fd, Kind kind, int rfd, int domain);

// Whether a failed rsocket option call means "rsockets do not have this
// option" (so the placeholder answers as a kernel socket would).
inline bool unsupported(int err) {
  return err == ENOTSUP || err == EOPNOTSUPP || err == ENOPROTOOPT;
}

// True while the preload itself waits in rpoll() (rpoll_as_is): the poll()
// calls rpoll makes on ordinary descriptors reach the kernel as they are, a
// listener's placeholder (listener.h) among them, instead of being taken
// for the rsocket it stands for.
inline thread_local bool inside_rpoll = false;

// rpoll() on descriptors already translated: rsockets' own, and kernel ones.
inline int rpoll_as_is(pollfd* fds, nfds_t n, int timeout) {
  bool outer = inside_rpoll;
  inside_rpoll = true;
  int ret = rpoll(fds, n, timeout);
  int saved = errno;
  inside_rpoll = outer;
  errno = saved;
  return ret;
}

// A wait's timespec in poll's milliseconds, rounded up (null: -1, for ever).
inline int timespec_ms(const timespec* ts) {
  if (!ts) return -1;
  long long ms = ts->tv_sec * 1000LL + (ts->tv_nsec + 999999) / 1000000;
  return ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
}

// Runs `wait` with `mask` as the thread's signal mask (ppoll, pselect,
// epoll_pwait): rsockets have no atomic variant, so the mask is swapped
// around the wait.
template <typename Wait>
int with_sigmask(const sigset_t* mask, Wait wait) {
  if (!mask) return wait();
  sigset_t old;
  pthread_sigmask(SIG_SETMASK, mask, &old);
  int ret = wait();
  int saved = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return ret;
}

}  // namespace rspreload
