#include "core/objects.h"

#include "core/cm.h"

#include <unistd.h>

#include <chrono>

namespace rdmacm::core {

EventChannel::~EventChannel() {
  if (pub.fd >= 0) ::close(pub.fd);
}

void EventTally::done() {
  std::lock_guard lock(mutex_);
  ++done_;
  cv_.notify_all();
}

void EventTally::wait(uint32_t reported, const std::function<void()>& on_stall) {
  constexpr auto kStall = std::chrono::seconds(5);
  std::unique_lock lock(mutex_);
  auto counted = [&] { return done_ >= reported; };
  // Usually all acknowledged already: no clock read (a system call where the
  // clock has no vDSO, as in the test VM).
  if (counted() || cv_.wait_for(lock, kStall, counted)) return;
  if (on_stall) {
    lock.unlock();
    on_stall();
    lock.lock();
  }
  cv_.wait(lock, counted);
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

constinit ObjectsStorage objects_storage;

void Objects::publish(const std::shared_ptr<CmId>& id, bool by_handle) {
  ids.add(&id->pub, id);
  if (!by_handle) return;
  try {
    handles.add(handle_key(id->handle), id);
  } catch (...) {  // std::bad_alloc: both or none
    ids.take_if(&id->pub, id.get());
    throw;
  }
}

void Objects::detach(const CmId& id) {
  ids.take_if(&id.pub, &id);
  handles.take_if(handle_key(id.handle), &id);
}

}  // namespace rdmacm::core
