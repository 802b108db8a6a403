// Live objects by key: what the kernel names by a number or a uid that is not
// an object's own address (ids made for connection requests, by kernel
// handle; multicast groups; queued events' doorbells). Ids and channels, which
// the application names by pointer, live in StablePools instead (see
// stable_pool.h): validated by where they point, without a table.
//
// A stale, foreign or doubly freed key finds nothing. Lookups hand out shared
// ownership: an object stays alive while a call that found it is still
// running, even if another thread removes it meanwhile.
//
// A table is an open-addressed array (linear probing with backward-shift
// removal, no allocation per entry, never shrinks) behind a LeafLock held for
// a probe and a reference count: no system call, no pthread mutex, a handful
// of instructions when uncontended.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <unordered_set>
#include <utility>

#include "common/mutex.h"
#include "core/leaf_lock.h"

namespace rdmacm::core {

// Ref: how the table owns its entries (std::shared_ptr<Owner>, or PoolRef<Owner>
// for objects in a StablePool).
template <typename Public, typename Owner, typename Ref = std::shared_ptr<Owner>>
class Registry {
 public:
  constexpr Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry() { delete[] slots_; }

  // Adds (or replaces) the entry. Throws std::bad_alloc if the table cannot grow.
  void add(const Public* key, Ref owner) EXCLUDES(lock_) {
    if (!key) return;
    LockGuard lock(lock_);
    if (Slot* s = probe(key)) {
      std::swap(s->owner, owner);  // the old owner goes after the lock
      return;
    }
    if ((live_ + 1) * 4 > capacity() * 3) grow();  // at most three quarters full
    size_t i = home(key);
    while (slots_[i].key) i = (i + 1) & mask_;
    slots_[i].key = key;
    slots_[i].owner = std::move(owner);
    ++live_;
  }

  Ref find(const Public* key) const EXCLUDES(lock_) {
    LockGuard lock(lock_);
    const Slot* s = probe(key);
    return s ? s->owner : nullptr;
  }

  // Removes and returns the entry; nullptr if it was not live (e.g. a second
  // destroy racing the first).
  Ref take(const Public* key) EXCLUDES(lock_) {
    Ref owner;  // declared first: released after the lock
    LockGuard lock(lock_);
    if (Slot* s = probe(key)) {
      owner = std::move(s->owner);
      remove(s);
    }
    return owner;
  }

  // Removes the entry only if it is still this owner's (a key such as a
  // kernel handle may have been reused by a newer owner meanwhile).
  void take_if(const Public* key, const Owner* expected) EXCLUDES(lock_) {
    Ref owner;
    LockGuard lock(lock_);
    Slot* s = probe(key);
    if (s && s->owner.get() == expected) {
      owner = std::move(s->owner);
      remove(s);
    }
  }

  // Calls f(key, owner) for every live entry, under the table's lock (so f
  // takes no lock: see objects.h).
  template <typename F>
  void for_each(F&& f) const EXCLUDES(lock_) {
    LockGuard lock(lock_);
    for (size_t i = 0; i < capacity(); ++i)
      if (slots_[i].key) f(slots_[i].key, *slots_[i].owner);
  }

  size_t size() const EXCLUDES(lock_) {
    LockGuard lock(lock_);
    return live_;
  }

 private:
  struct Slot {
    const Public* key = nullptr;  // nullptr: free
    Ref owner;
  };

  size_t capacity() const REQUIRES(lock_) { return slots_ ? mask_ + 1 : 0; }
  // Fibonacci hashing: the product's top bits.
  size_t home(const Public* key) const REQUIRES(lock_) {
    return (reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_;
  }

  Slot* probe(const Public* key) const REQUIRES(lock_) {
    if (!key || !slots_) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i];
      if (!slots_[i].key) return nullptr;
    }
  }

  // Frees the slot and moves later entries of its probe run back into the
  // gap (no tombstones: a lookup never walks over removed entries).
  void remove(Slot* gap) REQUIRES(lock_) {
    size_t i = static_cast<size_t>(gap - slots_);
    for (size_t j = (i + 1) & mask_; slots_[j].key; j = (j + 1) & mask_) {
      size_t h = home(slots_[j].key);
      bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      slots_[i].key = slots_[j].key;
      slots_[i].owner = std::move(slots_[j].owner);
      i = j;
    }
    slots_[i].key = nullptr;
    slots_[i].owner.reset();
    --live_;
  }

  // Doubles the table (16 slots to begin with): 24 to 48 bytes per entry. Allocates before touching
  // anything, so a failure leaves the table as it was.
  void grow() REQUIRES(lock_) {
    size_t cap = capacity() ? capacity() * 2 : 16;
    Slot* fresh = new Slot[cap];
    Slot* old = slots_;
    size_t old_cap = capacity();
    slots_ = fresh;
    mask_ = cap - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(cap));
    for (size_t i = 0; i < old_cap; ++i) {
      if (!old[i].key) continue;
      size_t k = home(old[i].key);
      while (slots_[k].key) k = (k + 1) & mask_;
      slots_[k].key = old[i].key;
      slots_[k].owner = std::move(old[i].owner);
    }
    delete[] old;
  }

  // The table's lock: a leaf (nothing else is taken under it, for_each's
  // callback included), held for a probe and the owner's reference count; an
  // owner let go of by add/take/take_if is released after it.
  mutable LeafLock lock_;
  Slot* slots_ GUARDED_BY(lock_) PT_GUARDED_BY(lock_) = nullptr;
  size_t mask_ GUARDED_BY(lock_) = 0;
  unsigned shift_ GUARDED_BY(lock_) = 64;
  size_t live_ GUARDED_BY(lock_) = 0;
};

}  // namespace rdmacm::core

namespace rdmacm::core {

// Plain pointers the library handed out (malloc'd lists, address infos), so
// that freeing a foreign or already freed pointer is refused, not executed.
template <typename T>
class PointerSet {
 public:
  void add(T* p) EXCLUDES(mutex_) {
    LockGuard lock(mutex_);
    live_.insert(p);
  }
  // True if p was live (and is no longer).
  bool take(T* p) EXCLUDES(mutex_) {
    LockGuard lock(mutex_);
    return live_.erase(p) != 0;
  }

 private:
  Mutex mutex_;  // a leaf; guards the set
  std::unordered_set<T*> live_ GUARDED_BY(mutex_);
};

}  // namespace rdmacm::core
