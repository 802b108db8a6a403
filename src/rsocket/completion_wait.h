// Waiting for completions, written once for both socket kinds (rdma-core
// 44's rs_process_cq / ds_process_cqs and rs_get_comp): take what completed
// until the caller's test holds; between looks, arm the CQs, look once more
// (a completion that came before the arming raises no event), then sleep on
// the completion channel.
//
// A socket S derives from CompletionWait<S> and provides, as friends:
//   int reap() REQUIRES(cq_mutex_);   take what completed, never sleeping:
//                                     0 or -errno
//   void arm() REQUIRES(cq_mutex_);   request an event from every CQ
//   int sleep_on_cq(int ms) REQUIRES(cq_sleep_mutex_) EXCLUDES(cq_mutex_);
//                                     wait up to ms (-1: no limit) for a
//                                     channel event and take it: how many
//                                     were taken, or -errno
//
// Locks: cq_mutex_ guards the CQs and everything completions update; it is
// let go while a thread sleeps, so that a sender and a receiver both make
// progress. cq_sleep_mutex_ serialises sleepers; it is taken after cq_mutex_
// and let go before cq_mutex_ is taken again (never the other way round: a
// sleeper that woke holding it while another thread held cq_mutex_ and
// wanted it was a deadlock).
//
// A lost wake-up: one thread takes the event that a second, about to sleep,
// armed for; the CQ is then disarmed and the second would sleep for ever.
// So the CQs count as armed only while no event was taken since the arming
// (events_taken_ counts them), and a thread about to sleep checks that once
// more under cq_sleep_mutex_, else it looks again.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include "common/mutex.h"
#include "rsocket/clock.h"
#include "rsocket/spin_budget.h"
#include "rsocket/timeouts.h"

namespace rdmacm::rsocket {

// The spin before sleeping (rdma-core 44's spins a fixed polling_time):
// process(nonblock) returns 0 when what the caller waits for holds,
// -EWOULDBLOCK when it would have to sleep, else -errno. Looks without
// sleeping for as long as the budget says (spin_budget.h), then (unless
// nonblock) once more allowed to sleep; the time the wait took teaches the
// budget.
template <typename Process>
int spin_then_sleep(bool nonblock, SpinBudget& budget, Process&& process) {
  int ret = process(true);
  if (!ret || nonblock || ret != -EWOULDBLOCK) return ret;
  uint64_t start = now_us(), limit = budget.us();
  while ((ret = process(true)) == -EWOULDBLOCK) {
    if (now_us() - start > limit) {
      ret = process(false);
      break;
    }
  }
  budget.learn(now_us() - start);
  return ret;
}

template <typename S>
class CompletionWait {
 public:
  using Test = bool (S::*)() const;

  // Until test() holds: looks without sleeping for a while (the socket's
  // spin budget), then (unless nonblock: -EWOULDBLOCK) sleeps between looks.
  // 0, or -errno.
  int wait(Test test, bool nonblock) {
    return spin_then_sleep(nonblock, spin_,
                           [&](bool look_only) { return wait_loop(test, look_only, -1); });
  }

  // As wait, bounded by a socket's SO_RCVTIMEO or SO_SNDTIMEO (timeouts.h's
  // microseconds: kNone for ever, kAtOnce never sleeping): -EAGAIN once it
  // passed, as the kernel's sk_wait_event.
  int wait(Test test, bool nonblock, uint64_t timeout_us) {
    if (timeout_us == Timeouts::kNone) return wait(test, nonblock);
    if (timeout_us == Timeouts::kAtOnce) return wait(test, true);
    uint64_t deadline = Timeouts::deadline(timeout_us);
    return spin_then_sleep(nonblock, spin_, [&](bool look_only) {
      if (look_only) return wait_loop(test, true, -1);
      int ret = wait_loop(test, false, Timeouts::poll_ms(deadline), true);
      return ret == -ETIMEDOUT && now_us() >= deadline ? -EAGAIN : ret;
    });
  }

  // As wait, for at most ms milliseconds: a stopped or dead peer cannot hold
  // the caller. Whether test() held.
  bool wait_ms(Test test, int ms) { return wait_loop(test, false, ms) == 0; }

  // Arms the CQs for a caller that sleeps on their channel itself (rpoll).
  void arm_for_poll() EXCLUDES(cq_mutex_) {
    S& s = self();
    LockGuard lock(s.cq_mutex_);
    s.arm_once();
  }

  // That caller's channel fired: takes the event (never sleeping).
  void take_wakeup() EXCLUDES(cq_mutex_, cq_sleep_mutex_) {
    S& s = self();
    LockGuard sleep(s.cq_sleep_mutex_);
    int n = s.sleep_on_cq(0);
    if (n > 0) events_taken_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  }

 protected:
  Mutex cq_mutex_;  // the CQs and what completions update
  Mutex cq_sleep_mutex_ ACQUIRED_AFTER(cq_mutex_);  // one sleeper on the channel (see above)

 private:
  S& self() { return static_cast<S&>(*this); }

  bool armed() const REQUIRES(cq_mutex_) {
    return armed_at_ == events_taken_.load(std::memory_order_relaxed);
  }
  // Unchecked inside: the analysis cannot tell self() (whose arm() it calls)
  // from this.
  void arm_once() REQUIRES(cq_mutex_) NO_THREAD_SAFETY_ANALYSIS {
    if (armed()) return;
    self().arm();
    armed_at_ = events_taken_.load(std::memory_order_relaxed);
  }

  // The loop under wait and wait_ms: 0 once test() holds, -EWOULDBLOCK
  // (look_only), -ETIMEDOUT (ms passed), or reap's or the sleep's -errno
  // (a timed wait keeps looking after the sleep's error unless end_on_error).
  int wait_loop(Test test, bool look_only, int ms, bool end_on_error = false) EXCLUDES(cq_mutex_, cq_sleep_mutex_) {
    S& s = self();
    uint64_t deadline = ms < 0 ? 0 : now_us() + static_cast<uint64_t>(ms) * 1000;
    UniqueLock lock(s.cq_mutex_);
    for (;;) {
      int ret = s.reap();
      if ((s.*test)()) return 0;
      if (ret) return ret;
      if (look_only) return -EWOULDBLOCK;
      int slice = -1;
      if (ms >= 0) {
        uint64_t now = now_us();
        if (now >= deadline) return -ETIMEDOUT;
        // Bounded slices: a timed wait re-checks at least every 100 ms.
        slice = static_cast<int>(std::min<uint64_t>((deadline - now) / 1000 + 1, 100));
      }
      if (!s.armed()) {
        s.arm_once();
        continue;  // look once more: a completion may have come before the arming
      }
      uint64_t seen = s.armed_at_;
      int n = 1;
      {
        LockGuard sleep(s.cq_sleep_mutex_);
        lock.unlock();
        // Unless another thread took an event since we armed (the CQ may be
        // disarmed: look again instead).
        if (events_taken_.load(std::memory_order_relaxed) == seen) {
          n = s.sleep_on_cq(slice);
          if (n > 0) events_taken_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
        }
      }
      lock.lock();
      // A blocking wait ends on the sleep's error (EINTR: as rdma-core 44's);
      // a timed one keeps looking until its time is up.
      if (n < 0 && (ms < 0 || end_on_error)) return n;
    }
  }

  SpinBudget spin_;
  std::atomic<uint64_t> events_taken_{0};  // changed under cq_sleep_mutex_
  uint64_t armed_at_ GUARDED_BY(cq_mutex_) = ~uint64_t{0};  // events_taken_ when last armed
};

}  // namespace rdmacm::rsocket
