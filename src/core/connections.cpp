// Connection establishment and teardown: connect, listen, accept, reject,
// disconnect, establish, notify, ECE (the QP transitions they drive are
// core/qp_state.cpp's).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "core/device_table.h"
#include "core/events.h"
#include "core/id_state.h"
#include "core/objects.h"
#include "core/qp_state.h"
#include "core/transport.h"

namespace rdmacm::core {
namespace {

// The reject reason rdma_reject_ece sends (IBTA: vendor option not supported).
constexpr uint8_t kRejectVendorOptionNotSupported = 35;

// A synchronous id waits for its establishment; then the accept is done.
int finish_accept(CmId& id) {
  int err = complete(id);
  if (!err) id.accept_state.store(2, std::memory_order_release);
  return err;
}

// rdma-core's checks of an application's connection parameters.
int validate(const CmId& id, const rdma_conn_param* param) {
  if (id.pub.ps != RDMA_PS_TCP) return 0;
  if (!id.pub.qp && !param) return -EINVAL;
  if (!param) return 0;
  if (!id.device) return -EINVAL;
  if (param->responder_resources != RDMA_MAX_RESP_RES &&
      param->responder_resources > id.device->max_responder_resources)
    return -EINVAL;
  if (param->initiator_depth != RDMA_MAX_INIT_DEPTH &&
      param->initiator_depth > id.device->max_initiator_depth)
    return -EINVAL;
  return 0;
}

ucma_abi_conn_param to_kernel(const CmId& id, const rdma_conn_param* src, uint32_t qp_num,
                              uint8_t srq) {
  ucma_abi_conn_param w{};
  w.qp_num = qp_num;
  w.srq = srq;
  w.responder_resources = id.responder_resources;
  w.initiator_depth = id.initiator_depth;
  w.valid = 1;
  // Connection data from an rdma_addrinfo (ai_connect) goes first.
  const CmIdExtras* x = id.peek_extras();
  size_t prefix = x ? std::min(x->connect_data.size(), sizeof(w.private_data)) : 0;
  if (prefix) std::memcpy(w.private_data, x->connect_data.data(), prefix);  // data() may be NULL
  w.private_data_len = static_cast<uint8_t>(prefix);
  if (!src) {
    w.retry_count = 7;
    w.rnr_retry_count = 7;
    return w;
  }
  w.flow_control = src->flow_control;
  w.retry_count = src->retry_count;
  w.rnr_retry_count = src->rnr_retry_count;
  if (src->private_data && src->private_data_len) {
    size_t len = std::min<size_t>(src->private_data_len, sizeof(w.private_data) - prefix);
    std::memcpy(w.private_data + prefix, src->private_data, len);
    w.private_data_len = static_cast<uint8_t>(std::min<size_t>(prefix + len, 255));
  }
  return w;
}

}  // namespace

int connect(rdma_cm_id* pub, const rdma_conn_param* param) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (!id->device) return -EINVAL;  // route not resolved
  if (int err = validate(*id, param)) return err;
  id->initiator_depth = param && param->initiator_depth != RDMA_MAX_INIT_DEPTH
                            ? param->initiator_depth
                            : id->device->max_initiator_depth;
  id->responder_resources = param && param->responder_resources != RDMA_MAX_RESP_RES
                                ? param->responder_resources
                                : id->device->max_responder_resources;
  uint32_t qp_num = param ? param->qp_num : 0;
  uint8_t srq = param ? param->srq : 0;
  if (id->pub.qp) {
    qp_num = id->pub.qp->qp_num;
    srq = id->pub.qp->srq != nullptr;
  }
  id->connect_error = false;
  if (int err = transport().connect(id->fd(), id->handle,
                                    to_kernel(*id, param, qp_num, srq), id->local_ece))
    return err;
  if (CmIdExtras* x = id->peek_extras()) x->connect_data.clear();
  return complete(*id);
}

int listen(rdma_cm_id* pub, int backlog) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (int err = transport().listen(id->fd(), id->handle, backlog)) return err;
  id->listening = true;
  return refresh_address(*id, Gids::never);
}

int accept(rdma_cm_id* pub, const rdma_conn_param* param) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (!id->device) return -EINVAL;  // not a connection request's id
  // Accepted already: EINVAL, as the kernel would answer, without asking it
  // (its failed second accept leaves the id's destroy, and the process's
  // exit, waiting ~70 s in ib_cm: measured on rxe, rdma-core 44 too). One the
  // kernel took whose wait for the establishment failed waits again.
  switch (id->accept_state.load(std::memory_order_acquire)) {
    case 2:
      return -EINVAL;
    case 1:
      return finish_accept(*id);
  }
  if (int err = validate(*id, param)) return err;
  uint32_t qp_num = id->pub.qp ? id->pub.qp->qp_num : param ? param->qp_num : 0;
  uint8_t srq = id->pub.qp ? id->pub.qp->srq != nullptr : param ? param->srq : 0;

  if (!param || param->initiator_depth == RDMA_MAX_INIT_DEPTH)
    id->initiator_depth = std::min(id->initiator_depth, id->device->max_initiator_depth);
  else
    id->initiator_depth = param->initiator_depth;
  if (!param || param->responder_resources == RDMA_MAX_RESP_RES)
    id->responder_resources =
        std::min(id->responder_resources, id->device->max_responder_resources);
  else
    id->responder_resources = param->responder_resources;

  if (!is_ud(*id)) {
    if (int err = modify_qp_rtr(*id, id->responder_resources)) return err;
    if (int err = modify_qp_rts(*id, id->initiator_depth)) return err;
  }
  if (int err = transport().accept(id->fd(), id->handle, id->uid(),
                                   to_kernel(*id, param, qp_num, srq), id->local_ece)) {
    modify_qp_err(*id);
    return err;
  }
  id->accept_state.store(1, std::memory_order_release);
  if (is_ud(*id)) {
    if (id->sync) ack_stored_event(*id);
    id->accept_state.store(2, std::memory_order_release);
    return 0;
  }
  return finish_accept(*id);
}

int reject(rdma_cm_id* pub, const void* private_data, uint8_t len, bool ece) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (len && !private_data) return -EINVAL;
  return transport().reject(id->fd(), id->handle, private_data, len,
                            ece ? kRejectVendorOptionNotSupported : 0);
}

int disconnect(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (!id->pub.verbs) return -EINVAL;
  switch (id->pub.verbs->device->transport_type) {
    case IBV_TRANSPORT_IB:
      if (int err = modify_qp_err(*id)) return err;
      break;
    case IBV_TRANSPORT_IWARP:
      if (int err = modify_qp_sqd(*id)) return err;
      break;
    default:
      return -EINVAL;
  }
  if (int err = transport().disconnect(id->fd(), id->handle)) return err;
  return complete(*id);
}

int complete_pending(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  return complete(*id);
}

int flush_qp(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  return modify_qp_err(*id);
}

int establish(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (id->pub.qp) return -EINVAL;  // the library already did it
  return finish_connect(*id);
}

int notify(rdma_cm_id* pub, int event) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  return transport().notify(id->fd(), id->handle, static_cast<uint32_t>(event));
}

int init_qp_attr(rdma_cm_id* pub, ibv_qp_attr* attr, int* mask) {
  auto id = find_id(pub);
  if (!id || !attr || !mask) return -EINVAL;
  uint32_t state = enum_value(attr->qp_state);  // the application's, maybe past the enum
  if (state > IBV_QPS_UNKNOWN) return -EINVAL;    // as the kernel answers
  return transport().init_qp_attr(id->fd(), id->handle, static_cast<ibv_qp_state>(state), attr,
                                  mask);
}

int set_local_ece(rdma_cm_id* pub, const ibv_ece* ece) {
  auto id = find_id(pub);
  // For applications managing their own QP; the library's QPs carry theirs.
  if (!id || id->pub.qp || !ece || !ece->vendor_id || ece->comp_mask) return -EINVAL;
  id->local_ece.vendor_id = ece->vendor_id;
  id->local_ece.attr_mod = ece->options;
  return 0;
}

int get_remote_ece(rdma_cm_id* pub, ibv_ece* ece) {
  auto id = find_id(pub);
  if (!id || id->pub.qp || !ece) return -EINVAL;
  *ece = {};
  ece->vendor_id = id->remote_ece.vendor_id;
  ece->options = id->remote_ece.attr_mod;
  return 0;
}

}  // namespace rdmacm::core
