// Queue pairs and shared receive queues on an id.
#include <rdma/rdma_cma.h>

#include "api/entry.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_create_qp(rdma_cm_id*, ibv_pd*, ibv_qp_init_attr*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_create_qp_ex(rdma_cm_id*, ibv_qp_init_attr_ex*) { return api::not_implemented(); }
RDMACM_EXPORT void rdma_destroy_qp(rdma_cm_id*) { api::not_implemented(); }
RDMACM_EXPORT int rdma_create_srq(rdma_cm_id*, ibv_pd*, ibv_srq_init_attr*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_create_srq_ex(rdma_cm_id*, ibv_srq_init_attr_ex*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_destroy_srq(rdma_cm_id*) { return api::not_implemented(); }
