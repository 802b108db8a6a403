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
  return core::event_name(core::event_type(event));
}
