// The synchronous endpoint API.
#include <rdma/rdma_cma.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                                 ibv_qp_init_attr* qp_init_attr) {
  return api::call([&] { return core::create_ep(id, res, pd, qp_init_attr); });
}

RDMACM_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
  api::call([&] { return core::destroy_ep(id); });
}

RDMACM_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  return api::call([&] { return core::get_request(listen, id); });
}
