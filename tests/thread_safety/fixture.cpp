// Compiled by check.py with clang and the library's thread-safety flags:
// clean as it stands, and each BREAK_* macro breaks one lock rule, which the
// analysis must report as an error (proving the build's check bites).
#include "common/mutex.h"
#include "core/leaf_lock.h"

namespace {

class Counter {
 public:
  void bump() {
#ifndef BREAK_UNGUARDED_WRITE
    rdmacm::LockGuard lock(mu_);
#endif
    ++n_;
  }

  void bump_twice_letting_go() {
    rdmacm::UniqueLock lock(mu_);
    ++n_;
    lock.unlock();
#ifndef BREAK_WRITE_AFTER_UNLOCK
    lock.lock();
#endif
    ++n_;
  }

  void wait_for_some() {
    rdmacm::UniqueLock lock(mu_);
    while (n_ == 0) cv_.wait(mu_);
  }

  void bump_from_outside() {
#ifndef BREAK_REQUIRES_UNHELD
    rdmacm::LockGuard lock(mu_);
#endif
    bump_locked();
  }

  void bump_leaf() {
#ifndef BREAK_LEAF_UNGUARDED
    rdmacm::LockGuard lock(leaf_);
#endif
    m_ = 2;
  }

 private:
  void bump_locked() REQUIRES(mu_) { ++n_; }

  rdmacm::Mutex mu_;
  rdmacm::CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
  rdmacm::core::LeafLock leaf_;
  int m_ GUARDED_BY(leaf_) = 0;
};

}  // namespace

int main() {
  Counter c;
  c.bump();
  c.bump_twice_letting_go();
  c.wait_for_some();
  c.bump_from_outside();
  c.bump_leaf();
  return 0;
}
