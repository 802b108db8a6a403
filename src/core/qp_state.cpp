#include "core/qp_state.h"

#include <rdma/rdma_cma.h>

#include "core/device_table.h"
#include "core/transport.h"

namespace rdmacm::core {
namespace {

// Asks the kernel for the attributes of the given state and applies them.
// The kernel's converter fills every field a mask bit it returns can name.
int to_state(CmId& id, ibv_qp* qp, ibv_qp_state state, ibv_qp_attr& attr, int* mask) {
  if (int err = transport().init_qp_attr(id.fd(), id.handle, state, &attr, mask)) return err;
  return qp ? modify_qp(qp, attr, *mask) : 0;
}

int to_plain_state(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr attr{};
  attr.qp_state = state;
  return modify_qp(qp, attr, IBV_QP_STATE);
}

}  // namespace

int modify_qp(ibv_qp* qp, ibv_qp_attr& attr, int mask) {
  int err = ibv_modify_qp(qp, &attr, mask);
  return err > 0 ? -err : err;
}

int modify_qp_init(CmId& id, ibv_qp* qp) {
  ibv_qp_attr attr;
  int mask = 0;
  if (int err = to_state(id, qp, IBV_QPS_INIT, attr, &mask)) return err;
  if (id.pub.qp_type != IBV_QPT_UD) return 0;
  if (int err = to_plain_state(qp, IBV_QPS_RTR)) return err;
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  return modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int modify_qp_rtr(CmId& id, uint8_t responder_resources) {
  if (!id.pub.qp) return 0;
  ibv_qp_attr attr;
  int mask = 0;
  // Refresh INIT first: the path may have changed since the QP was created.
  if (int err = to_state(id, id.pub.qp, IBV_QPS_INIT, attr, &mask)) return err;
  if (int err = to_state(id, nullptr, IBV_QPS_RTR, attr, &mask)) return err;
  // The kernel sets RoCE-only mask bits on InfiniBand ports; mask them off
  // there, as rdma-core does.
  if (id.device && id.pub.port_num >= 1 &&
      id.pub.port_num <= id.device->link_layer.size() &&
      id.device->link_layer[id.pub.port_num - 1] == IBV_LINK_LAYER_INFINIBAND)
    mask &= ~0xe00000;
  if (responder_resources != RDMA_MAX_RESP_RES)
    attr.max_dest_rd_atomic = responder_resources;
  return modify_qp(id.pub.qp, attr, mask);
}

int modify_qp_rts(CmId& id, uint8_t initiator_depth) {
  if (!id.pub.qp) return 0;
  ibv_qp_attr attr;
  int mask = 0;
  if (int err = to_state(id, nullptr, IBV_QPS_RTS, attr, &mask)) return err;
  if (initiator_depth != RDMA_MAX_INIT_DEPTH) attr.max_rd_atomic = initiator_depth;
  return modify_qp(id.pub.qp, attr, mask);
}

int modify_qp_err(CmId& id) { return id.pub.qp ? to_plain_state(id.pub.qp, IBV_QPS_ERR) : 0; }

int modify_qp_sqd(CmId& id) { return id.pub.qp ? to_plain_state(id.pub.qp, IBV_QPS_SQD) : 0; }

int finish_connect(CmId& id) {
  int err = modify_qp_rtr(id, RDMA_MAX_RESP_RES);
  if (!err) err = modify_qp_rts(id, RDMA_MAX_INIT_DEPTH);
  if (!err) err = transport().accept(id.fd(), id.handle, 0, ucma_abi_conn_param{}, id.local_ece);
  if (err) modify_qp_err(id);
  return err;
}

}  // namespace rdmacm::core
