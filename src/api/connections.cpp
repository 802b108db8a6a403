// Connection establishment and teardown.
#include <rdma/rdma_cma.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  return api::call([&] { return core::connect(id, conn_param); });
}

RDMACM_EXPORT int rdma_listen(rdma_cm_id* id, int backlog) {
  return api::call([&] { return core::listen(id, backlog); });
}

RDMACM_EXPORT int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  return api::call([&] { return core::accept(id, conn_param); });
}

RDMACM_EXPORT int rdma_reject(rdma_cm_id* id, const void* private_data,
                              uint8_t private_data_len) {
  return api::call([&] { return core::reject(id, private_data, private_data_len, false); });
}

RDMACM_EXPORT int rdma_reject_ece(rdma_cm_id* id, const void* private_data,
                                  uint8_t private_data_len) {
  return api::call([&] { return core::reject(id, private_data, private_data_len, true); });
}

RDMACM_EXPORT int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  return api::call([&] { return core::notify(id, static_cast<int>(core::enum_value(event))); });
}

RDMACM_EXPORT int rdma_disconnect(rdma_cm_id* id) {
  return api::call([&] { return core::disconnect(id); });
}

RDMACM_EXPORT int rdma_establish(rdma_cm_id* id) {
  return api::call([&] { return core::establish(id); });
}

RDMACM_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  return api::call([&] { return core::init_qp_attr(id, qp_attr, qp_attr_mask); });
}

RDMACM_EXPORT int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  return api::call([&] { return core::get_remote_ece(id, ece); });
}

RDMACM_EXPORT int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  return api::call([&] { return core::set_local_ece(id, ece); });
}
