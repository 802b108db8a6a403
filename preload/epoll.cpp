// epoll_create, epoll_create1, epoll_ctl, epoll_wait, epoll_pwait, epoll_pwait2 over
// librdmacm's repoll_* (rsockets and ordinary descriptors in one set). The
// program's epoll descriptor is a kernel epoll instance standing for the
// repoll set; where the library has no repoll (ENOSYS), it is simply the
// kernel's epoll and serves ordinary descriptors as always.
#include <rdma/rsocket.h>

#include "interpose.h"

using namespace rspreload;

namespace {

Entry* repoll_entry(int fd) {
  Entry* e = find_entry(fd);
  return e && e->kind.load(std::memory_order_acquire) == Kind::repoll ? e : nullptr;
}

}  // namespace

RSPRELOAD_EXPORT int epoll_create1(int flags) noexcept {
  int fd = real::epoll_create1(flags);
  if (fd < 0) return fd;
  int saved = errno;
  int rfd = repoll_create(flags);
  if (rfd < 0) {
    errno = saved;
    return fd;
  }
  adopt(fd, Kind::repoll, rfd, 0);
  errno = saved;
  return fd;
}

RSPRELOAD_EXPORT int epoll_create(int size) noexcept {
  if (size <= 0) return fail(EINVAL);
  return epoll_create1(0);
}

RSPRELOAD_EXPORT int epoll_ctl(int epfd, int op, int fd, epoll_event* ev) noexcept {
  Entry* set = repoll_entry(epfd);
  if (!set) return real::epoll_ctl(epfd, op, fd, ev);
  Entry* e = find_entry(fd);
  Kind k = e ? e->kind.load(std::memory_order_acquire) : Kind::kernel;
  if (k == Kind::fork_pending) k = rsocket_entry(fd) ? Kind::rsocket : Kind::kernel;
  int target = (k == Kind::rsocket || k == Kind::repoll) ? e->rfd : fd;
  int ret = repoll_ctl(set->rfd, op, target, ev);
  // A listener's kernel TCP side (listener.h) goes with it, under the same data.
  if (ret == 0 && k == Kind::rsocket && e->twin.load(std::memory_order_acquire)) {
    int saved = errno;
    repoll_ctl(set->rfd, op, fd, ev);
    errno = saved;
  }
  return ret;
}

RSPRELOAD_EXPORT int epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
  Entry* set = repoll_entry(epfd);
  return set ? repoll_wait(set->rfd, events, max, timeout)
             : real::epoll_wait(epfd, events, max, timeout);
}

RSPRELOAD_EXPORT int epoll_pwait(int epfd, epoll_event* events, int max, int timeout,
                                 const sigset_t* mask) {
  Entry* set = repoll_entry(epfd);
  if (!set) return real::epoll_pwait(epfd, events, max, timeout, mask);
  return with_sigmask(mask, [&] { return repoll_wait(set->rfd, events, max, timeout); });
}

RSPRELOAD_EXPORT int epoll_pwait2(int epfd, epoll_event* events, int max, const timespec* timeout,
                                  const sigset_t* mask) {
  Entry* set = repoll_entry(epfd);
  if (!set) return real::epoll_pwait2(epfd, events, max, timeout, mask);
  if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000L))
    return fail(EINVAL);
  int ms = timespec_ms(timeout);
  return with_sigmask(mask, [&] { return repoll_wait(set->rfd, events, max, ms); });
}
