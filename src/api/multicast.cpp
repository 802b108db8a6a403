// Multicast groups.
#include <rdma/rdma_cma.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return api::call([&] { return core::join_multicast(id, addr, context); });
}

RDMACM_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr,
                                         void* context) {
  return api::call([&] { return core::join_multicast_ex(id, mc_join_attr, context); });
}

RDMACM_EXPORT int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  return api::call([&] { return core::leave_multicast(id, addr); });
}
