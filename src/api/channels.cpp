// Event channels and events.
#include <rdma/rdma_cma.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT rdma_event_channel* rdma_create_event_channel(void) {
  rdma_event_channel* channel = nullptr;
  return api::call([&] { return core::create_channel(&channel); }) ? nullptr : channel;
}

RDMACM_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  api::call([&] { return core::destroy_channel(channel); });
}

RDMACM_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!event) return api::fail(EINVAL);
  return api::call([&] { return core::get_event(channel, event); });
}

RDMACM_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  return api::call([&] { return core::ack_event(event); });
}

RDMACM_EXPORT int rdma_write_cm_event(rdma_cm_id* id, rdma_cm_event_type event, int status,
                                      uint64_t arg) {
  return api::call([&] { return core::write_event(id, core::event_type(event), status, arg); });
}

RDMACM_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
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
  uint32_t i = core::event_type(event);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "UNKNOWN EVENT";
}
