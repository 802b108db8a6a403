// Locks the thread-safety analysis can see (common/thread_annotations.h):
// libstdc++'s std::mutex, std::lock_guard and std::unique_lock carry no
// annotations, so code locking them is not checked. Use these instead:
//
//   Mutex            a std::mutex (CAPABILITY): lock(), unlock(), try_lock()
//   LockGuard<L>     holds L (a CAPABILITY with lock()/unlock(): Mutex,
//                    core's LeafLock) for its scope; LockGuard g(mu_)
//   UniqueLock<L>    the same, and may unlock() and lock() again in between
//                    (to call out without the lock); BasicLockable, so
//                    std::condition_variable_any may wait on it
//   CondVar          a std::condition_variable waited on with a held Mutex:
//                      while (!ready_) cv_.wait(mu_);
//                    (the loop is the caller's, so the analysis checks the
//                    condition's reads: a predicate lambda is a separate
//                    function to it, which holds nothing)
//
// Write each lock's rule where it is declared: what it guards (GUARDED_BY on
// those members), which locks may be held when it is taken (ACQUIRED_AFTER, or
// "a leaf: takes no other"), and what it is held across.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace rdmacm {

class CAPABILITY("mutex") Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { m_.lock(); }
  void unlock() RELEASE() { m_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return m_.try_lock(); }
  // Tells the analysis this mutex is held where it cannot see that (a
  // callback run under it, say). Checks nothing at run time.
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex m_;
};

template <typename L>
class SCOPED_CAPABILITY LockGuard {
 public:
  explicit LockGuard(L& l) ACQUIRE(l) : l_(l) { l_.lock(); }
  ~LockGuard() RELEASE() { l_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  L& l_;
};

// Holds L from construction; unlock() and lock() let go of it and take it
// again (the analysis follows both); the destructor lets go if held.
// BasicLockable, so std::condition_variable_any can wait on it.
template <typename L>
class SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(L& l) ACQUIRE(l) : l_(l) { l_.lock(); }
  ~UniqueLock() RELEASE() {
    if (held_) l_.unlock();
  }
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

  void lock() ACQUIRE() {
    l_.lock();
    held_ = true;
  }
  void unlock() RELEASE() {
    l_.unlock();
    held_ = false;
  }

 private:
  L& l_;
  bool held_ = true;
};

class CondVar {
 public:
  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

  // Sleeps until notified (or woken spuriously: loop on the condition). mu is
  // let go of while asleep and held again on return, as std::condition_variable
  // does; to the analysis it stays held.
  void wait(Mutex& mu) REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock);
  }
  template <typename Clock, typename Duration>
  std::cv_status wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& t)
      REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_until(held.lock, t);
  }
  template <typename Rep, typename Period>
  std::cv_status wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& d) REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_for(held.lock, d);
  }

 private:
  // A std::unique_lock over the caller's held mutex that leaves it held when
  // it goes (even if the wait throws), since the caller's guard owns it.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.m_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

}  // namespace rdmacm
