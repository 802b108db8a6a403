// rpoll: as rdma-core 44's, first a short spin over the sockets' state (the
// calling thread's spin budget: spin_budget.h), then sleeping in poll(2) on
// what would wake each socket (its CQ's channel, its CM channel, a
// listener's accept queue) beside the ordinary fds, re-checking at least
// every wake_up_interval.
//
// A socket's state may change behind a sleeping thread (the CM service sees
// a disconnect, another thread takes the completion that woke both): every
// sleeper also watches the state-change broadcast (state_change.h), which
// whoever changes a socket's state announces, and whoever returns from a
// sleep rings, so that each re-checks before sleeping again.
#include "rsocket/poll.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <vector>

#include "rsocket/clock.h"
#include "rsocket/config.h"
#include "rsocket/file.h"
#include "rsocket/spin_budget.h"
#include "rsocket/state_change.h"
#include "rsocket/table.h"

namespace rdmacm::rsocket {
namespace {

// Every socket's and fd's readiness now, without sleeping.
int check(pollfd* fds, nfds_t nfds) {
  int n = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    if (File* f = find_file(fds[i].fd))
      fds[i].revents = f->poll_state(fds[i].events);
    else
      ::poll(&fds[i], 1, 0);
    if (fds[i].revents) ++n;
  }
  return n;
}

// rpoll's sleep, after its spin: 0 (timeout passed), how many are ready, or -errno.
int sleep_until_ready(pollfd* fds, nfds_t nfds, int timeout, uint64_t start) {
  std::vector<pollfd> rfds(nfds + 1);
  for (;;) {
    // Arm, then look: a completion after the arming wakes the sleep, one
    // before it is seen by the look (the other order lost a reply that came
    // in between until wake_up_interval: memcslap stalled on it).
    for (nfds_t i = 0; i < nfds; ++i) {
      if (File* f = find_file(fds[i].fd)) {
        int wake = f->wait_fd();
        if (f->poll_state(fds[i].events)) return check(fds, nfds);
        rfds[i] = {wake, POLLIN, 0};
      } else {
        rfds[i] = {fds[i].fd, fds[i].events, 0};
      }
    }
    int sig = sleep_begin();
    if (sig == -EAGAIN) continue;
    if (sig < 0) return sig;
    rfds[nfds] = {sig, POLLIN, 0};
    int sleep_ms = config().wake_up_interval;
    if (timeout >= 0) {
      int left = timeout - static_cast<int>((now_us() - start) / 1000);
      if (left <= 0) {
        sleep_end(false);
        return 0;
      }
      sleep_ms = std::min(left, sleep_ms);
    }
    if (::poll(rfds.data(), nfds + 1, sleep_ms) < 0) {
      int err = errno;
      sleep_end(false);
      return -err;
    }
    int n = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
      if (File* f = find_file(fds[i].fd)) {
        if (rfds[i].revents) f->consume_wakeup();
        fds[i].revents = f->poll_state(fds[i].events);
      } else {
        fds[i].revents = rfds[i].revents;
      }
      if (fds[i].revents) ++n;
    }
    sleep_end(true);
    if (n) return n;
  }
}

// poll(2)'s bound: more descriptors than RLIMIT_NOFILE is EINVAL, before
// any is looked at (rpoll read past the array, and crashed). The limit is
// read again only when nfds passes the last one read (a limit lowered since
// is not seen).
bool past_nofile_limit(nfds_t nfds) {
  static std::atomic<rlim_t> known{0};
  if (nfds <= known.load(std::memory_order_relaxed)) return false;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl)) return false;
  known.store(rl.rlim_cur, std::memory_order_relaxed);
  return nfds > rl.rlim_cur;
}

}  // namespace

int poll(pollfd* fds, nfds_t nfds, int timeout) {
  if (past_nofile_limit(nfds)) return -EINVAL;
  if (!fds && nfds) return -EFAULT;
  int n = check(fds, nfds);
  if (n || !timeout) return n;
  // Each thread has its rhythm: a server's event loop, a client's requests.
  thread_local SpinBudget budget;
  uint64_t start = now_us(), limit = budget.us();
  while (now_us() - start <= limit) {
    if ((n = check(fds, nfds))) {
      budget.learn(now_us() - start);
      return n;
    }
  }
  n = sleep_until_ready(fds, nfds, timeout, start);
  budget.learn(now_us() - start);
  return n;
}

int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return -EINVAL;
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    bool any = false;
    if (readfds && FD_ISSET(fd, readfds)) events |= POLLIN, any = true;
    if (writefds && FD_ISSET(fd, writefds)) events |= POLLOUT, any = true;
    if (exceptfds && FD_ISSET(fd, exceptfds)) any = true;
    if (any) fds.push_back({fd, events, 0});
  }
  int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  int ret = rsocket::poll(fds.data(), fds.size(), ms);
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  if (ret <= 0) return ret;
  int n = 0;
  for (const pollfd& p : fds) {
    if (readfds && (p.revents & (POLLIN | POLLHUP))) FD_SET(p.fd, readfds), ++n;
    if (writefds && (p.revents & POLLOUT)) FD_SET(p.fd, writefds), ++n;
    if (exceptfds && (p.revents & ~(POLLIN | POLLOUT))) FD_SET(p.fd, exceptfds), ++n;
  }
  return n;
}

}  // namespace rdmacm::rsocket
