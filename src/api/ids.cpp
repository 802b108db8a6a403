// Identifiers, addressing and options.
#include <rdma/rdma_cma.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id,
                                 void* context, rdma_port_space ps) {
  return api::call([&] {
    return core::create_id(channel, id, context, static_cast<int>(core::enum_value(ps)));
  });
}

RDMACM_EXPORT int rdma_destroy_id(rdma_cm_id* id) {
  return api::call([&] { return core::destroy_id(id); });
}

RDMACM_EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  return api::call([&] { return core::bind_addr(id, addr); });
}

RDMACM_EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr,
                                    sockaddr* dst_addr, int timeout_ms) {
  return api::call([&] { return core::resolve_addr(id, src_addr, dst_addr, timeout_ms); });
}

RDMACM_EXPORT int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  return api::call([&] { return core::resolve_route(id, timeout_ms); });
}

RDMACM_EXPORT uint16_t rdma_get_src_port(rdma_cm_id* id) {
  try {
    return core::src_port(id);
  } catch (...) {
    return 0;
  }
}

RDMACM_EXPORT uint16_t rdma_get_dst_port(rdma_cm_id* id) {
  try {
    return core::dst_port(id);
  } catch (...) {
    return 0;
  }
}

RDMACM_EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  return api::call([&] { return core::migrate_id(id, channel); });
}

RDMACM_EXPORT int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval,
                                  size_t optlen) {
  return api::call([&] { return core::set_option(id, level, optname, optval, optlen); });
}
