#include "rsocket/table.h"

#include <atomic>
#include <new>

#include "common/mutex.h"
#include "rsocket/socket.h"

namespace rdmacm::rsocket {
namespace {

constexpr int kPageBits = 10;
constexpr int kPageSize = 1 << kPageBits;
constexpr int kPages = 1 << 12;  // fds below 4M

struct Page {
  std::atomic<File*> slot[kPageSize];
};
constinit std::atomic<Page*> pages[kPages] = {};
Mutex grow;  // a leaf: making a page (lookups take no lock)

}  // namespace

File* find_file(int fd) {
  if (fd < 0 || fd >= kPages * kPageSize) return nullptr;
  Page* page = pages[fd >> kPageBits].load(std::memory_order_acquire);
  return page ? page->slot[fd & (kPageSize - 1)].load(std::memory_order_acquire) : nullptr;
}

Socket* find_socket(int fd) { return socket_of(find_file(fd)); }

bool insert_file(int fd, File* f) {
  if (fd < 0 || fd >= kPages * kPageSize) return false;
  std::atomic<Page*>& slot = pages[fd >> kPageBits];
  Page* page = slot.load(std::memory_order_acquire);
  if (!page) {
    LockGuard lock(grow);
    page = slot.load(std::memory_order_relaxed);
    if (!page) {
      page = new (std::nothrow) Page{};
      if (!page) return false;
      slot.store(page, std::memory_order_release);
    }
  }
  page->slot[fd & (kPageSize - 1)].store(f, std::memory_order_release);
  return true;
}

void remove_file(int fd) {
  if (fd < 0 || fd >= kPages * kPageSize) return;
  if (Page* page = pages[fd >> kPageBits].load(std::memory_order_acquire))
    page->slot[fd & (kPageSize - 1)].store(nullptr, std::memory_order_release);
}

}  // namespace rdmacm::rsocket
