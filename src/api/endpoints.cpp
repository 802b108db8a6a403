// The synchronous endpoint API.
#include <rdma/rdma_cma.h>

#include "api/entry.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo*, ibv_pd*, ibv_qp_init_attr*) {
  if (id) *id = nullptr;
  return api::not_implemented();
}
RDMACM_EXPORT void rdma_destroy_ep(rdma_cm_id*) {}
RDMACM_EXPORT int rdma_get_request(rdma_cm_id*, rdma_cm_id** id) {
  if (id) *id = nullptr;
  return api::not_implemented();
}
