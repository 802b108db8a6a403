#include "core/objects.h"

#include "core/cm.h"

#include <unistd.h>

#include <chrono>

#include "common/mutex.h"

namespace rdmacm::core {

EventChannel::~EventChannel() {
  if (pub.fd >= 0) ::close(pub.fd);
}

namespace {

// Where waiting tallies sleep. done() looks at `waiters` after counting and
// wait() counts itself in before looking at the tally, both sequentially
// consistent: either the waiter sees the new count or the counter sees the
// waiter and notifies under the mutex (which the waiter holds until it sleeps).
// The mutex is a leaf and guards no data (the tallies and `waiters` are
// atomics): it only orders a waiter's look at its tally before it sleeps
// against a counter's notify. A waiter lets go of it to call on_stall.
struct TallyWaits {
  Mutex mutex;
  CondVar cv;
  std::atomic<int> waiters{0};
};

TallyWaits& tally_waits() {
  static TallyWaits* waits = new TallyWaits;  // never destroyed: see Objects
  return *waits;
}

}  // namespace

void EventTally::done() {
  done_.fetch_add(1);
  TallyWaits& w = tally_waits();
  if (w.waiters.load()) {
    LockGuard lock(w.mutex);
    w.cv.notify_all();
  }
}

void EventTally::wait(uint32_t reported, const std::function<void()>& on_stall) {
  auto counted = [&] { return done_.load() >= reported; };
  if (counted()) return;  // the usual case: no lock, no clock read
  constexpr auto kStall = std::chrono::seconds(5);
  TallyWaits& w = tally_waits();
  UniqueLock lock(w.mutex);
  w.waiters.fetch_add(1);
  const auto stall = std::chrono::steady_clock::now() + kStall;
  while (!counted())
    if (w.cv.wait_until(w.mutex, stall) == std::cv_status::timeout) break;
  if (!counted() && on_stall) {
    lock.unlock();
    on_stall();
    lock.lock();
  }
  while (!counted()) w.cv.wait(w.mutex);
  w.waiters.fetch_sub(1);
}

const char* event_name(uint32_t type) {
  // Indexed by enum rdma_cm_event_type; the same strings as rdma-core.
  static const char* const names[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",   "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",         "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",      "RDMA_CM_EVENT_TIMEWAIT_EXIT",
      "RDMA_CM_EVENT_ADDRINFO_RESOLVED", "RDMA_CM_EVENT_ADDRINFO_ERROR",
      "RDMA_CM_EVENT_USER",             "RDMA_CM_EVENT_INTERNAL",
  };
  return type < sizeof(names) / sizeof(names[0]) ? names[type] : "UNKNOWN EVENT";
}

CmIdExtras& CmId::extras() {
  if (CmIdExtras* x = peek_extras()) return *x;
  auto fresh = std::make_unique<CmIdExtras>();  // throws std::bad_alloc
  CmIdExtras* installed = nullptr;
  if (extras_.compare_exchange_strong(installed, fresh.get(), std::memory_order_acq_rel,
                                      std::memory_order_acquire))
    return *fresh.release();
  return *installed;  // another thread's came first; ours goes
}

constinit ObjectsStorage objects_storage;

void Objects::publish(const IdRef& id, bool by_handle) {
  if (by_handle) handles.add(handle_key(id->handle), id);  // throws std::bad_alloc: nothing done
  StablePool<CmId>::list(*id);
}

void Objects::detach(const CmId& id) {
  StablePool<CmId>::unlist(id);
  handles.take_if(handle_key(id.handle), &id);
}

}  // namespace rdmacm::core
