// Slots that never move and never go away: address space reserved in a few
// regions (PROT_NONE: no memory, nothing counted against overcommit), made
// readable and writable 64 KiB at a time as slots are needed, never given
// back. What it is for: a pointer the application hands back is checked by
// where it points (a range check and a division per region, no table; one
// region holds 131,072 ids), and a slot's header may be read even after the
// object in it is gone. StablePool (ids, channels) and the event pool keep
// their objects here.
//
// Address space is taken modestly (the first region 64 MiB for ids and
// events, 4 MiB for channels; each next one twice the last), since an
// RLIMIT_AS counts reservations too.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

// LeakSanitizer does not look inside our own mappings: the objects in the
// slots hold the only pointers to what they own, so each committed step is
// made a root region (else a live id's extras read as leaked at exit).
#if defined(__SANITIZE_ADDRESS__)
#define RDMACM_LSAN_ROOTS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RDMACM_LSAN_ROOTS 1
#endif
#endif
#ifdef RDMACM_LSAN_ROOTS
#include <sanitizer/lsan_interface.h>
#endif

namespace rdmacm::core {

template <typename Slot>
class SlotArray {
 public:
  constexpr SlotArray() = default;

  // The slot whose bytes hold p; nullptr if p is not inside a built slot.
  // The first region is looked at first, inline (where nearly every program
  // finds all of its slots).
  Slot* containing(const void* p) const {
    if (Slot* s = in(regions_[0], p)) return s;
    return count_.load(std::memory_order_relaxed) > 1 ? in_later(p) : nullptr;
  }

  // Calls f(Slot&) for every slot built so far.
  template <typename F>
  void for_each(F&& f) const {
    int n = count_.load(std::memory_order_acquire);
    for (int k = 0; k < n; ++k) {
      Slot* base = regions_[k].base.load(std::memory_order_relaxed);
      size_t made = regions_[k].built.load(std::memory_order_acquire) / sizeof(Slot);
      for (size_t i = 0; i < made; ++i) f(base[i]);
    }
  }

  // Commits one more step, builds its slots with Slot() and calls
  // fresh(Slot&) for each, lowest address first. Throws std::bad_alloc,
  // leaving the array as it was. Callers serialise their grows (their lock).
  template <typename F>
  void grow(F&& fresh) {
    int n = count_.load(std::memory_order_relaxed);
    Region* r = n ? &regions_[n - 1] : nullptr;
    if (!r || r->committed + kStep > r->reserved) r = reserve(n);
    Slot* base = r->base.load(std::memory_order_relaxed);
    char* step = reinterpret_cast<char*>(base) + r->committed;
    if (::mprotect(step, kStep, PROT_READ | PROT_WRITE)) {
      if (r == &regions_[n]) {  // new and unused: give it back
        ::munmap(base, r->reserved);
        r->base.store(nullptr, std::memory_order_relaxed);
        r->reserved = 0;
      }
      throw std::bad_alloc();
    }
#ifdef RDMACM_LSAN_ROOTS
    __lsan_register_root_region(step, kStep);
#endif
    r->committed += kStep;
    size_t first = r->built.load(std::memory_order_relaxed) / sizeof(Slot);
    size_t last = r->committed / sizeof(Slot);
    for (size_t i = first; i < last; ++i) new (&base[i]) Slot;
    // containing() sees built slots only
    r->built.store(last * sizeof(Slot), std::memory_order_release);
    if (r == &regions_[n]) count_.store(n + 1, std::memory_order_release);
    for (size_t i = first; i < last; ++i) fresh(base[i]);
  }

 private:
  static constexpr size_t kStep = size_t(64) << 10;
  static constexpr size_t kFirst = std::min(size_t(64) << 20, std::bit_ceil(sizeof(Slot)) << 17);
  static constexpr int kRegions = 16;
  static_assert(sizeof(Slot) <= kStep);

  struct Region {
    std::atomic<Slot*> base{nullptr};  // stored before the region is counted
    std::atomic<size_t> built{0};  // bytes of slots built (a multiple of sizeof(Slot))
    size_t reserved = 0;   // bytes of address space (grow's caller's lock)
    size_t committed = 0;  // of which readable and writable (the same)
  };

  // A new region after the n there are (not yet counted: grow publishes it
  // with its first slots).
  Region* reserve(int n) {
    if (n == kRegions) throw std::bad_alloc();
    for (size_t want = kFirst << n; want >= kStep; want /= 2) {
      void* m = ::mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) continue;
      Region& r = regions_[n];
      r.base.store(static_cast<Slot*>(m), std::memory_order_relaxed);
      r.reserved = want;
      return &r;
    }
    throw std::bad_alloc();
  }

  static Slot* in(const Region& r, const void* p) {
    // built first: it is 0 until base is set and stored after it (release),
    // so a non-zero built comes with base.
    size_t built = r.built.load(std::memory_order_acquire);
    Slot* base = r.base.load(std::memory_order_relaxed);
    size_t off = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base);
    return off < built ? &base[off / sizeof(Slot)] : nullptr;
  }
  Slot* in_later(const void* p) const {
    int n = count_.load(std::memory_order_acquire);
    for (int k = 1; k < n; ++k)
      if (Slot* s = in(regions_[k], p)) return s;
    return nullptr;
  }

  Region regions_[kRegions];
  std::atomic<int> count_{0};
};

}  // namespace rdmacm::core
