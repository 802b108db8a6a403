// Queue pairs and shared receive queues on an id.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  return api::call([&] { return core::create_qp(id, pd, qp_init_attr); });
}

RDMACM_EXPORT int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* qp_init_attr) {
  return api::call([&] { return core::create_qp_ex(id, qp_init_attr); });
}

RDMACM_EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
  api::call([&] { return core::destroy_qp(id); });
}

RDMACM_EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  return api::call([&] { return core::create_srq(id, pd, attr); });
}

RDMACM_EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  return api::call([&] { return core::create_srq_ex(id, attr); });
}

RDMACM_EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
  api::call([&] { return core::destroy_srq(id); });
}
