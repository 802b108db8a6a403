#include "fd_map.h"

#include <rdma/rsocket.h>

#include <new>

#include "fork.h"

namespace rspreload {
namespace {

constexpr int kPageBits = 10;
constexpr int kPageSize = 1 << kPageBits;
constexpr int kPages = 1024;  // descriptors below 2^20 can be rsockets

struct Page {
  std::atomic<Entry*> slots[kPageSize];
};
constinit std::atomic<Page*> pages[kPages] = {};

std::atomic<Entry*>* slot(int fd, bool create) {
  if (fd < 0 || fd >= kPages * kPageSize) return nullptr;
  std::atomic<Page*>& p = pages[fd >> kPageBits];
  Page* page = p.load(std::memory_order_acquire);
  if (!page) {
    if (!create) return nullptr;
    Page* fresh = new (std::nothrow) Page{};
    if (!fresh) return nullptr;
    if (p.compare_exchange_strong(page, fresh, std::memory_order_acq_rel)) {
      page = fresh;
    } else {
      delete fresh;  // another thread installed it first
    }
  }
  return &page->slots[fd & (kPageSize - 1)];
}

}  // namespace

Entry* find_entry(int fd) {
  std::atomic<Entry*>* s = slot(fd, false);
  return s ? s->load(std::memory_order_acquire) : nullptr;
}

bool map_fd(int fd, Entry* e) {
  std::atomic<Entry*>* s = slot(fd, true);
  if (!s) return false;
  // The kernel gave us this number, so whatever the map still holds for it
  // was closed behind our back (a libc-internal close, a raw syscall).
  if (Entry* stale = s->exchange(e, std::memory_order_acq_rel)) release(stale);
  return true;
}

bool map_new(int fd, Kind kind, int rfd, int domain, ForkRole fork) {
  Entry* e = new (std::nothrow) Entry;
  if (!e) return false;
  e->rfd = rfd;
  e->domain = domain;
  e->fork = fork;
  e->kind.store(kind, std::memory_order_release);
  if (map_fd(fd, e)) return true;
  delete e;
  return false;
}

Entry* unmap_fd(int fd) {
  std::atomic<Entry*>* s = slot(fd, false);
  return s ? s->exchange(nullptr, std::memory_order_acq_rel) : nullptr;
}

int release(Entry* e) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return 0;
  int ret = 0;
  Kind k = e->kind.load(std::memory_order_acquire);
  if ((k == Kind::rsocket || k == Kind::repoll) && e->rfd >= 0) ret = rclose(e->rfd);
  delete e;
  return ret;
}

void for_each_entry(void (*fn)(int fd, Entry* e)) {
  for (int p = 0; p < kPages; p++) {
    Page* page = pages[p].load(std::memory_order_acquire);
    if (!page) continue;
    for (int i = 0; i < kPageSize; i++)
      if (Entry* e = page->slots[i].load(std::memory_order_acquire)) fn(p * kPageSize + i, e);
  }
}

Entry* rsocket_entry(int fd) {
  Entry* e = find_entry(fd);
  if (!e) return nullptr;
  Kind k = e->kind.load(std::memory_order_acquire);
  if (k == Kind::fork_pending) k = settle_fork(fd, e);
  return k == Kind::rsocket ? e : nullptr;
}

Entry* rpoll_entry(int fd) {
  Entry* e = find_entry(fd);
  if (e && e->kind.load(std::memory_order_acquire) == Kind::repoll) return e;
  return rsocket_entry(fd);
}

}  // namespace rspreload
