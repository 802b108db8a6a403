// Connection establishment and teardown.
#include <rdma/rdma_cma.h>

#include "api/entry.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_connect(rdma_cm_id*, rdma_conn_param*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_listen(rdma_cm_id*, int) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_accept(rdma_cm_id*, rdma_conn_param*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_reject(rdma_cm_id*, const void*, uint8_t) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_notify(rdma_cm_id*, ibv_event_type) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_disconnect(rdma_cm_id*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_establish(rdma_cm_id*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_init_qp_attr(rdma_cm_id*, ibv_qp_attr*, int*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { return api::not_implemented(); }
