// One array of slots in address space reserved on first use (PROT_NONE: no
// memory, nothing counted against overcommit), made readable and writable
// 64 KiB at a time as slots are needed, never given back. What it is for:
// memory whose slots never move and never go away, so that a pointer the
// application hands back can be checked by where it points (one range check
// and one division, no table) and a slot's header may be read even after
// the object in it is gone. StablePool (ids, channels) and the event pool
// keep their objects here.
//
// Room for eight million slots (at most 4 GiB: an id's 512-byte slots);
// where the address space is limited (RLIMIT_AS) a smaller range is taken.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

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
  Slot* containing(const void* p) const {
    Slot* base = base_.load(std::memory_order_acquire);
    size_t off = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base);
    if (off >= made_.load(std::memory_order_acquire) * sizeof(Slot)) return nullptr;
    return &base[off / sizeof(Slot)];
  }

  // The slots built so far: [0, size()).
  size_t size() const { return made_.load(std::memory_order_acquire); }
  Slot& operator[](size_t i) const { return base_.load(std::memory_order_relaxed)[i]; }

  // Commits one more step and builds its slots with Slot(); returns the
  // indices of the new ones, [first, second). Throws std::bad_alloc, leaving
  // the array as it was. Callers serialise their grows (their own lock).
  std::pair<size_t, size_t> grow() {
    constexpr size_t kStep = size_t(64) << 10;
    constexpr size_t kReserve = std::min(size_t(1) << 32, std::bit_ceil(sizeof(Slot)) << 23);
    static_assert(sizeof(Slot) <= kStep);
    Slot* base = base_.load(std::memory_order_relaxed);
    if (!base) {
      for (size_t want = kReserve; !base && want >= kStep * 16; want /= 2) {
        void* m = ::mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) continue;
        base = static_cast<Slot*>(m);
        reserved_ = want;
      }
      if (!base) throw std::bad_alloc();
      base_.store(base, std::memory_order_release);
    }
    char* step = reinterpret_cast<char*>(base) + committed_;
    if (committed_ + kStep > reserved_ || ::mprotect(step, kStep, PROT_READ | PROT_WRITE))
      throw std::bad_alloc();
#ifdef RDMACM_LSAN_ROOTS
    __lsan_register_root_region(step, kStep);
#endif
    committed_ += kStep;
    size_t first = made_.load(std::memory_order_relaxed);
    size_t last = committed_ / sizeof(Slot);
    for (size_t i = first; i < last; ++i) new (&base[i]) Slot;
    made_.store(last, std::memory_order_release);  // containing() sees built slots
    return {first, last};
  }

 private:
  std::atomic<Slot*> base_{nullptr};
  std::atomic<size_t> made_{0};  // slots built
  size_t reserved_ = 0;   // bytes of address space (grow's caller's lock)
  size_t committed_ = 0;  // of which readable and writable (the same)
};

}  // namespace rdmacm::core
