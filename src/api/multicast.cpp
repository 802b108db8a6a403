// Multicast groups.
#include <rdma/rdma_cma.h>

#include "api/entry.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) { return api::not_implemented(); }
RDMACM_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return api::not_implemented(); }
