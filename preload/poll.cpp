// poll, ppoll, select, pselect (and __poll_chk, __ppoll_chk): when no
// descriptor in the call is an rsocket (or an epoll descriptor, which stands
// for a repoll set: epoll.cpp) they are libc's; otherwise rpoll waits on
// the rsockets' own descriptors and the ordinary ones together.
// select's sets are read and written the way the kernel's select does:
// readable on POLLIN/POLLHUP/POLLERR, writable on POLLOUT/POLLERR,
// exceptional on POLLPRI (rdma-core's mapping put HUP and ERR in the
// exception set, which socat read as a failure).
#include <rdma/rsocket.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>

#include "interpose.h"

using namespace rspreload;

extern "C" [[noreturn]] void __chk_fail(void);

namespace {

// A per-thread array of pollfds for rpoll, grown as needed.
pollfd* scratch(nfds_t n) {
  static thread_local pollfd* fds;
  static thread_local nfds_t size;
  if (n > size) {
    pollfd* grown = static_cast<pollfd*>(realloc(fds, n * sizeof(pollfd)));
    if (!grown) return nullptr;
    fds = grown;
    size = n;
  }
  return fds;
}

bool any_rsocket(const pollfd* fds, nfds_t n) {
  for (nfds_t i = 0; i < n; i++)
    if (rpoll_entry(fds[i].fd)) return true;
  return false;
}

// rpoll over the program's descriptors: an rsocket as its rsocket (an epoll
// descriptor as the repoll set it stands for), beside a
// listener its kernel TCP side (listener.h), whose POLLIN is the listener's
// too; ordinary descriptors as they are. revents are written on success.
int poll_rsockets(pollfd* fds, nfds_t n, int timeout, const sigset_t* mask) {
  nfds_t twins = 0;
  for (nfds_t i = 0; i < n; i++) {
    Entry* e = rpoll_entry(fds[i].fd);
    if (e && e->twin.load(std::memory_order_acquire)) twins++;
  }
  pollfd* r = scratch(n + twins);
  if (!r) return fail(ENOMEM);
  nfds_t m = n;
  for (nfds_t i = 0; i < n; i++) {
    Entry* e = rpoll_entry(fds[i].fd);
    r[i] = {e ? e->rfd : fds[i].fd, fds[i].events, 0};
    if (e && e->twin.load(std::memory_order_acquire) && m < n + twins)
      r[m++] = {fds[i].fd, static_cast<short>(fds[i].events & POLLIN), 0};
  }
  int ret = with_sigmask(mask, [&] { return rpoll_as_is(r, m, timeout); });
  if (ret < 0) return ret;
  ret = 0;
  for (nfds_t i = 0, t = n; i < n; i++) {
    fds[i].revents = r[i].revents;
    if (t < m && r[t].fd == fds[i].fd)  // the placeholder of a listener listening on TCP too
      fds[i].revents |= r[t++].revents & POLLIN;
    if (fds[i].revents) ret++;
  }
  return ret;
}

bool any_rsocket_in(int nfds, const fd_set* rd, const fd_set* wr, const fd_set* ex) {
  for (int fd = 0; fd < nfds; fd++) {
    if ((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex))) {
      if (rpoll_entry(fd)) return true;
    }
  }
  return false;
}

int select_rsockets(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, int timeout,
                    const sigset_t* mask) {
  // At most FD_SETSIZE: on the stack (scratch() is poll_rsockets').
  pollfd* fds = static_cast<pollfd*>(alloca(sizeof(pollfd) * (nfds ? nfds : 1)));
  nfds_t n = 0;
  for (int fd = 0; fd < nfds; fd++) {
    short events = 0;
    if (rd && FD_ISSET(fd, rd)) events |= POLLIN;
    if (wr && FD_ISSET(fd, wr)) events |= POLLOUT;
    if (ex && FD_ISSET(fd, ex)) events |= POLLPRI;
    if (!events) continue;
    fds[n++] = {fd, events, 0};
  }
  int ret = poll_rsockets(fds, n, timeout, mask);
  if (ret < 0) return ret;
  for (nfds_t i = 0; i < n; i++)
    if (fds[i].revents & POLLNVAL) return fail(EBADF);
  if (rd) FD_ZERO(rd);
  if (wr) FD_ZERO(wr);
  if (ex) FD_ZERO(ex);
  int count = 0;
  for (nfds_t i = 0; i < n; i++) {
    short got = fds[i].revents;
    if (rd && (fds[i].events & POLLIN) && (got & (POLLIN | POLLHUP | POLLERR))) {
      FD_SET(fds[i].fd, rd);
      count++;
    }
    if (wr && (fds[i].events & POLLOUT) && (got & (POLLOUT | POLLERR))) {
      FD_SET(fds[i].fd, wr);
      count++;
    }
    if (ex && (fds[i].events & POLLPRI) && (got & POLLPRI)) {
      FD_SET(fds[i].fd, ex);
      count++;
    }
  }
  return count;
}

}  // namespace

// More descriptors than RLIMIT_NOFILE: the kernel's answer (EINVAL), before
// any is looked at (the look for an rsocket read past the array). The limit
// is read again only when n passes the last one read.
static bool past_nofile_limit(nfds_t n) {
  static std::atomic<rlim_t> known{0};
  if (n <= known.load(std::memory_order_relaxed)) return false;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl)) return false;
  known.store(rl.rlim_cur, std::memory_order_relaxed);
  return n > rl.rlim_cur;
}

RSPRELOAD_EXPORT int poll(pollfd* fds, nfds_t n, int timeout) {
  if (inside_rpoll || !fds || past_nofile_limit(n) || !any_rsocket(fds, n)) return real::poll(fds, n, timeout);
  return poll_rsockets(fds, n, timeout, nullptr);
}

RSPRELOAD_EXPORT int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return poll(fds, n, timeout);
}

RSPRELOAD_EXPORT int ppoll(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask) {
  if (inside_rpoll || !fds || past_nofile_limit(n) || !any_rsocket(fds, n)) return real::ppoll(fds, n, ts, mask);
  return poll_rsockets(fds, n, timespec_ms(ts), mask);
}

RSPRELOAD_EXPORT int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask,
                                 size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return ppoll(fds, n, ts, mask);
}

RSPRELOAD_EXPORT int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* tv) {
  if (nfds < 0 || nfds > FD_SETSIZE || !any_rsocket_in(nfds, rd, wr, ex))
    return real::select(nfds, rd, wr, ex, tv);
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int timeout = -1;
  if (tv) {
    long long ms = tv->tv_sec * 1000LL + (tv->tv_usec + 999) / 1000;
    timeout = ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
  }
  int ret = select_rsockets(nfds, rd, wr, ex, timeout, nullptr);
  if (tv) {
    // Linux's select leaves the time not slept in *tv.
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long left = (tv->tv_sec * 1000000LL + tv->tv_usec) -
                     ((now.tv_sec - start.tv_sec) * 1000000LL + (now.tv_nsec - start.tv_nsec) / 1000);
    if (left < 0) left = 0;
    tv->tv_sec = left / 1000000;
    tv->tv_usec = left % 1000000;
  }
  return ret;
}

RSPRELOAD_EXPORT int pselect(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, const timespec* ts,
                             const sigset_t* mask) {
  if (nfds < 0 || nfds > FD_SETSIZE || !any_rsocket_in(nfds, rd, wr, ex))
    return real::pselect(nfds, rd, wr, ex, ts, mask);
  return select_rsockets(nfds, rd, wr, ex, timespec_ms(ts), mask);
}
