// The library's own mutex (see objects.h for which locks exist and the rule
// that each is a leaf). A capability to clang's thread-safety analysis
// (common/thread_annotations.h): hold it with LockGuard or UniqueLock
// (common/mutex.h), which the analysis follows; std::lock_guard it does not.
#pragma once

#include <atomic>

#include "common/thread_annotations.h"

namespace rdmacm::core {

// A mutex of 4 bytes (std::mutex takes 40, and there are several per id): one
// atomic compare-and-swap when free, a short spin, then a futex wait (through
// std::atomic::wait), so a holder preempted on a busy host is not spun on and
// a holder waiting on the kernel costs its waiters nothing. Not recursive.
// States: 0 free, 1 held, 2 held with waiters (Drepper's "futexes are tricky").
class CAPABILITY("mutex") LeafLock {
 public:
  void lock() ACQUIRE() {
    int c = 0;
    if (!state_.compare_exchange_strong(c, 1, std::memory_order_acquire)) contended(c);
  }
  void unlock() RELEASE() {
    if (state_.exchange(0, std::memory_order_release) == 2) state_.notify_one();
  }
  // Tells the analysis the lock is held where it cannot see that: in a
  // callback the holder passes down (SlotArray::grow's). Checks nothing.
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  void contended(int c) {
    for (int spins = 0; spins < 100; ++spins) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      c = 0;
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.compare_exchange_weak(c, 1, std::memory_order_acquire))
        return;
    }
    c = state_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
      state_.wait(2, std::memory_order_relaxed);
      c = state_.exchange(2, std::memory_order_acquire);
    }
  }

  std::atomic<int> state_{0};
};

}  // namespace rdmacm::core
