#include "core/event_pool.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "core/leaf_lock.h"

namespace rdmacm::core {
namespace {

// Slab k holds kFirst << k events, so a few slabs cover any load and the
// range check in claim_event looks at a few at most.
constexpr size_t kFirst = 16;
constexpr int kSlabs = 32;

class Pool {
 public:
  Event* take() {
    std::lock_guard lock(lock_);
    if (!free_) grow();  // throws std::bad_alloc, leaving the pool as it was
    Event* ev = free_;
    free_ = ev->next_free;
    ev->state.store(Event::kFilling, std::memory_order_relaxed);
    return ev;
  }

  void give(Event& ev) {
    IdRef owner;  // let go of after the lock (a destructor may
    std::shared_ptr<Multicast> group;  // run: it must not run under a leaf lock)
    std::lock_guard lock(lock_);
    owner = std::move(ev.owner);  // under the lock: for_each_handed_out reads it
    group = std::move(ev.group);
    ev.state.store(Event::kFree, std::memory_order_relaxed);
    ev.next_free = free_;
    free_ = &ev;
  }

  Event* find(const rdma_cm_event* pub) const {
    auto p = reinterpret_cast<uintptr_t>(pub);
    int n = count_.load(std::memory_order_acquire);
    for (int k = 0; k < n; ++k) {
      Event* base = slabs_[k].load(std::memory_order_relaxed);
      auto b = reinterpret_cast<uintptr_t>(base);
      if (p < b || p - b >= (kFirst << k) * sizeof(Event)) continue;
      Event* ev = &base[(p - b) / sizeof(Event)];
      return &ev->pub == pub ? ev : nullptr;
    }
    return nullptr;
  }

  void for_each(const std::function<void(const Event&)>& f) const {
    std::lock_guard lock(lock_);
    int n = count_.load(std::memory_order_relaxed);
    for (int k = 0; k < n; ++k) {
      const Event* base = slabs_[k].load(std::memory_order_relaxed);
      for (size_t i = 0; i < (kFirst << k); ++i)
        if (base[i].state.load(std::memory_order_acquire) == Event::kHandedOut) f(base[i]);
    }
  }

 private:
  void grow() {
    int k = count_.load(std::memory_order_relaxed);
    if (k == kSlabs) throw std::bad_alloc();
    Event* slab = new Event[kFirst << k];  // never deleted (see event_pool.h)
    for (size_t i = 0; i < (kFirst << k); ++i) {
      slab[i].next_free = free_;
      free_ = &slab[i];
    }
    slabs_[k].store(slab, std::memory_order_relaxed);
    count_.store(k + 1, std::memory_order_release);  // find() sees the slab first
  }

  mutable LeafLock lock_;
  Event* free_ = nullptr;
  std::atomic<Event*> slabs_[kSlabs] = {};
  std::atomic<int> count_{0};
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
