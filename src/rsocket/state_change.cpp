// The state-change broadcast (state_change.h). rpoll's sleepers count
// themselves in (sleepers), so that an announcement is written once per
// round of wake-ups while only they listen: the first wake-up of a round
// suspends further writes, and the last sleeper out empties the fd and ends
// the round. While repoll sets hold the broadcast, every announcement is
// written (a set needs an edge for each).
#include "rsocket/state_change.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "common/mutex.h"
#include "rsocket/kernel_fds.h"

namespace rdmacm::rsocket {
namespace {

Mutex mutex;  // a leaf
// The last kStateChangeLog announcements' fds, announced counting them all.
int changed[kStateChangeLog] GUARDED_BY(mutex);
uint64_t announced GUARDED_BY(mutex) = 0;
unsigned sleepers GUARDED_BY(mutex) = 0;
bool suspended GUARDED_BY(mutex) = false;  // a round of wake-ups is going on
std::atomic<int> subscribers{0};

// The broadcast's fd sits out of the numbers a program counts on
// (move_high): it is made at the first rpoll sleep, which under the preload
// can come inside the program's first accept() (a listener that also
// listens on kernel TCP waits on both).
int broadcast_fd() {
  static const int fd = [] {
    int f = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return f < 0 ? -errno : move_high(f);
  }();
  return fd;
}

void ring() {
  uint64_t c = 1;
  if (::write(broadcast_fd(), &c, sizeof(c)) < 0) {
    // Full after 2^64 rings: every listener has long been woken.
  }
}

void empty() {
  uint64_t c;
  if (::read(broadcast_fd(), &c, sizeof(c)) < 0) {
    // Already empty.
  }
}

}  // namespace

void announce_state_change(int fd) {
  if (broadcast_fd() < 0) return;
  LockGuard lock(mutex);
  changed[announced++ % kStateChangeLog] = fd;
  bool write = subscribers.load(std::memory_order_acquire) > 0;
  if (sleepers && !suspended) suspended = write = true;
  if (write) ring();
}

int state_change_subscribe(uint64_t* cursor) {
  int fd = broadcast_fd();
  if (fd >= 0) subscribers.fetch_add(1, std::memory_order_acq_rel);
  LockGuard lock(mutex);
  *cursor = announced;
  return fd;
}

bool state_changes_since(uint64_t* cursor, std::vector<int>* fds) {
  LockGuard lock(mutex);
  uint64_t from = *cursor;
  *cursor = announced;
  if (announced - from > kStateChangeLog) return false;
  for (uint64_t i = from; i != announced; ++i) fds->push_back(changed[i % kStateChangeLog]);
  return true;
}

void state_change_unsubscribe() { subscribers.fetch_sub(1, std::memory_order_acq_rel); }

int sleep_begin() {
  int fd = broadcast_fd();
  if (fd < 0) return fd;
  UniqueLock lock(mutex);
  if (suspended) {
    lock.unlock();
    sched_yield();
    return -EAGAIN;
  }
  ++sleepers;
  return fd;
}

// The last one out empties the fd and ends the round; anyone else who slept
// makes sure the others wake to re-check.
void sleep_end(bool slept) {
  LockGuard lock(mutex);
  if (!--sleepers) {
    empty();
    suspended = false;
  } else if (slept && !suspended) {
    suspended = true;
    ring();
  }
}

}  // namespace rdmacm::rsocket
