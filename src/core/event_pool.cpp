#include "core/event_pool.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "common/mutex.h"
#include "core/leaf_lock.h"
#include "core/slot_array.h"

namespace rdmacm::core {
namespace {

class Pool {
 public:
  Event* take() EXCLUDES(lock_) {
    LockGuard lock(lock_);
    if (!free_) grow();  // throws std::bad_alloc, leaving the pool as it was
    Event* ev = free_;
    free_ = ev->next_free;
    ev->state.store(Event::kFilling, std::memory_order_relaxed);
    return ev;
  }

  void give(Event& ev) EXCLUDES(lock_) {
    IdRef owner;  // let go of after the lock (a destructor may
    std::shared_ptr<Multicast> group;  // run: it must not run under a leaf lock)
    LockGuard lock(lock_);
    owner = std::move(ev.owner);  // under the lock: for_each_handed_out reads it
    group = std::move(ev.group);
    ev.state.store(Event::kFree, std::memory_order_relaxed);
    ev.next_free = free_;
    free_ = &ev;
  }

  Event* find(const rdma_cm_event* pub) const {
    Event* ev = events_.containing(pub);
    return ev && &ev->pub == pub ? ev : nullptr;
  }

  void for_each(const std::function<void(const Event&)>& f) const EXCLUDES(lock_) {
    LockGuard lock(lock_);
    events_.for_each([&](const Event& ev) {
      if (ev.state.load(std::memory_order_acquire) == Event::kHandedOut) f(ev);
    });
  }

 private:
  void grow() REQUIRES(lock_) {
    events_.grow([&](Event& ev) {
      lock_.assert_held();  // a lambda is analysed apart: it runs in this grow
      ev.next_free = free_;
      free_ = &ev;
    });
  }

  // The pool's lock: a leaf, held to take or give back an event and while
  // for_each's callback runs (which takes no lock: warn_unacked only reads).
  // Also guards each event's next_free, and orders give's moving an event's
  // owner and group out against for_each reading a handed-out event's (they
  // are filled without it while the event is kFilling, which for_each
  // skips). Claiming an event by its public pointer takes none (its state,
  // an atomic).
  mutable LeafLock lock_;
  Event* free_ GUARDED_BY(lock_) = nullptr;
  // Grown under lock_; read without it (find(): the array's own atomics).
  SlotArray<Event> events_;
};

constinit Pool pool;  // never destroyed: events may outlive main()

}  // namespace

Event* new_event() {
  Event* ev = pool.take();
  ev->pub = {};
  return ev;
}

void hand_out(Event& ev) { ev.state.store(Event::kHandedOut, std::memory_order_release); }

void clear_event(Event& ev) {
  ev.owner.reset();
  ev.group.reset();
  ev.pub = {};
}

void recycle_event(Event& ev) { pool.give(ev); }

Event* claim_event(const rdma_cm_event* pub) {
  Event* ev = pool.find(pub);
  if (!ev) return nullptr;
  uint8_t handed_out = Event::kHandedOut;
  return ev->state.compare_exchange_strong(handed_out, Event::kFilling,
                                           std::memory_order_acquire)
             ? ev
             : nullptr;
}

void for_each_handed_out(const std::function<void(const Event&)>& f) { pool.for_each(f); }

}  // namespace rdmacm::core
