#include "core/event_pool.h"

#include <cstddef>
#include <new>

#include "core/leaf_lock.h"

namespace rdmacm::core {
namespace {

// Freed blocks, most recent first, up to kKept of them (a burst of unacked
// events beyond that goes back to malloc). Every block is kBlock bytes, room
// for an Event and the control block around it; a larger request, should
// the standard library make one, goes to operator new as it is.
class BlockCache {
 public:
  static constexpr size_t kBlock = sizeof(Event) + 64;
  static constexpr int kKept = 64;

  void* take(size_t size) {
    if (size > kBlock) return ::operator new(size);
    {
      std::lock_guard lock(lock_);
      if (Free* f = head_) {
        head_ = f->next;
        --count_;
        return f;
      }
    }
    return ::operator new(kBlock);
  }

  void give(void* p, size_t size) {
    if (size <= kBlock) {
      std::lock_guard lock(lock_);
      if (count_ < kKept) {
        head_ = new (p) Free{head_};
        ++count_;
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  struct Free {
    Free* next;
  };
  LeafLock lock_;
  Free* head_ = nullptr;
  int count_ = 0;
};

constinit BlockCache cache;  // never destroyed: events may outlive main()

template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(cache.take(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { cache.give(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

}  // namespace

std::shared_ptr<Event> new_event() { return std::allocate_shared<Event>(PoolAllocator<Event>{}); }

}  // namespace rdmacm::core
