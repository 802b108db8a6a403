// Type-stable storage for objects the application holds by pointer (ids,
// channels): one SlotArray (core/slot_array.h), never given back to the
// system, each slot a small header (a reference count and a "listed" flag)
// that outlives the objects built and destroyed in it. A public pointer is
// validated by where it points (inside the array, at a slot's object) and by
// the header, without a table or a lock: one compare-and-swap takes a
// reference if the object is alive, and "listed" says whether the
// application's calls may find it.
//
// Why: a table lookup with a lock and a shared_ptr copy per call and per
// event was a fifth of the library's instructions per connection. What it
// costs: memory for the most objects ever alive at once stays allocated,
// and an old pointer whose slot holds a newer object names that object (as
// a reused malloc address does).
//
// Thread safety, in terms of the header's atomics only (so that TSan and the
// C++ model agree): an object is built, then `refs` is stored 1 (release);
// a finder's compare-and-swap from a non-zero count (acquire) sees it built;
// the last release (acq_rel) destroys it and returns the slot under the
// pool's lock, from which the next take builds a new one. Nobody increments
// a count of 0, so nobody reads an object being destroyed or built.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "common/mutex.h"
#include "core/leaf_lock.h"
#include "core/slot_array.h"

namespace rdmacm::core {

template <typename T>
class StablePool;

// How a slot is aligned: its size rounded up to a power of two when that
// wastes at most a sixteenth (an id: 504 -> 512 bytes), so that finding a
// slot from an address is a shift, not a division.
template <typename T>
constexpr size_t pool_slot_align() {
  constexpr size_t raw = sizeof(T) + 16;  // the header (below) comes first
  constexpr size_t pow2 = std::bit_ceil(raw);
  return pow2 - raw <= raw / 16 ? pow2 : alignof(std::max_align_t);
}

// A slot: the header that outlives the objects built in it, then the object.
// (Defined apart from the pool so that a PoolRef<T> member may be declared
// while T is still incomplete.)
template <typename T>
struct alignas(pool_slot_align<T>()) PoolSlot {
  std::atomic<uint32_t> refs{0};
  std::atomic<bool> listed{false};
  PoolSlot* next_free = nullptr;  // the pool's list (its lock)
  alignas(T) unsigned char storage[sizeof(T)];

  T* object() { return std::launder(reinterpret_cast<T*>(storage)); }
};

// Shared ownership of an object in a StablePool, shared_ptr's interface.
template <typename T>
class PoolRef {
 public:
  using Slot = PoolSlot<T>;

  PoolRef() = default;
  PoolRef(std::nullptr_t) {}
  PoolRef(const PoolRef& o) : slot_(o.slot_) {
    if (slot_) slot_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  PoolRef(PoolRef&& o) noexcept : slot_(std::exchange(o.slot_, nullptr)) {}
  PoolRef& operator=(PoolRef o) noexcept {
    std::swap(slot_, o.slot_);
    return *this;
  }
  ~PoolRef() { reset(); }

  void reset() {
    if (Slot* s = std::exchange(slot_, nullptr)) StablePool<T>::release(s);
  }
  T* get() const { return slot_ ? slot_->object() : nullptr; }
  T& operator*() const { return *slot_->object(); }
  T* operator->() const { return slot_->object(); }
  explicit operator bool() const { return slot_ != nullptr; }

 private:
  friend class StablePool<T>;
  struct Adopt {};
  PoolRef(Slot* s, Adopt) : slot_(s) {}  // takes over a reference already counted

  Slot* slot_ = nullptr;
};

template <typename T>
class StablePool {
 public:
  using Slot = PoolSlot<T>;

  static StablePool& get() { return instance_; }

  // A new object (built with T()), referenced once, not listed. Throws
  // std::bad_alloc.
  PoolRef<T> make() EXCLUDES(lock_) {
    Slot* s;
    {
      LockGuard lock(lock_);
      if (!free_) grow();  // throws, leaving the pool as it was
      s = free_;
      free_ = s->next_free;
      if (!free_) last_free_ = nullptr;
    }
    new (s->storage) T();
    s->refs.store(1, std::memory_order_release);
    return PoolRef<T>(s, typename PoolRef<T>::Adopt{});
  }

  // Makes the object findable by find(), and keeps it alive while it is:
  // listing holds a reference of its own, which unlist() lets go of (the
  // object is destroyed then if nobody else holds one). Each at most once.
  static void list(const T& obj) {
    Slot* s = slot_of(obj);
    s->refs.fetch_add(1, std::memory_order_relaxed);
    s->listed.store(true, std::memory_order_release);
  }
  // False if it was not listed (a second unlist lets go of nothing).
  static bool unlist(const T& obj) {
    Slot* s = slot_of(obj);
    if (!s->listed.exchange(false, std::memory_order_acq_rel)) return false;
    release(s);
    return true;
  }

  // The listed, live object whose key (key_of(T&), an address inside it) is
  // p; empty if there is none.
  template <typename KeyOf>
  PoolRef<T> find(const void* p, KeyOf key_of) const {
    Slot* s = locate(p, key_of);
    if (!s || !try_ref(s)) return nullptr;
    PoolRef<T> ref(s, typename PoolRef<T>::Adopt{});
    if (!s->listed.load(std::memory_order_acquire)) return nullptr;
    // A slot reused between locate() and the count names the new object:
    // its key is at the same address, so it is the object p names now.
    return ref;
  }

  // Calls f(T&) for every listed object, each referenced meanwhile; no lock
  // is held while f runs.
  template <typename F>
  void for_each(F&& f) const {
    slots_.for_each([&](Slot& s) {
      if (!try_ref(&s)) return;
      PoolRef<T> ref(&s, typename PoolRef<T>::Adopt{});
      if (s.listed.load(std::memory_order_acquire)) f(*ref);
    });
  }

  size_t listed() const {
    size_t n = 0;
    for_each([&](T&) { ++n; });
    return n;
  }

 private:
  friend class PoolRef<T>;

  static Slot* slot_of(const T& obj) {
    return reinterpret_cast<Slot*>(reinterpret_cast<uintptr_t>(&obj) - offsetof(Slot, storage));
  }

  // Takes a reference if the slot's object is alive (its count is not 0:
  // nobody counts up from 0, so nobody sees an object built or destroyed).
  static bool try_ref(Slot* s) {
    uint32_t r = s->refs.load(std::memory_order_relaxed);
    do {
      if (r == 0) return false;  // free, or being destroyed
    } while (!s->refs.compare_exchange_weak(r, r + 1, std::memory_order_acquire,
                                            std::memory_order_relaxed));
    return true;
  }

  template <typename KeyOf>
  Slot* locate(const void* p, KeyOf key_of) const {
    Slot* s = slots_.containing(p);
    // Only an address is computed here, nothing is read from the object.
    return s && key_of(*reinterpret_cast<T*>(s->storage)) == p ? s : nullptr;
  }

  static void release(Slot* s) {
    if (s->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    s->object()->~T();  // not listed: listing holds a reference
    StablePool& pool = get();
    LockGuard lock(pool.lock_);
    pool.push_free(s);
  }

  void grow() REQUIRES(lock_) {
    slots_.grow([&](Slot& s) {
      lock_.assert_held();  // a lambda is analysed apart: it runs in this grow
      push_free(&s);
    });
  }

  // Freed slots queue up behind the others (first in, first out), so that a
  // pointer to a destroyed object keeps failing for as long as possible
  // before its slot holds a new one. (lock_)
  void push_free(Slot* s) REQUIRES(lock_) {
    s->next_free = nullptr;
    (last_free_ ? last_free_->next_free : free_) = s;
    last_free_ = s;
  }

  // The free list's lock: a leaf, held to take or give back a slot (never
  // while an object is built or destroyed). Finding an object takes none.
  mutable LeafLock lock_;
  Slot* free_ GUARDED_BY(lock_) = nullptr;       // the next slot to use
  Slot* last_free_ GUARDED_BY(lock_) = nullptr;  // the last
  // Grown under lock_; read without it (containing(), for_each(): the
  // array's own atomics publish what grow built).
  SlotArray<Slot> slots_;

  static StablePool instance_;
};

// Never destroyed (no destructor to run): objects may be released after main().
template <typename T>
constinit StablePool<T> StablePool<T>::instance_;

}  // namespace rdmacm::core
