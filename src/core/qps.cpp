// Queue pairs and shared receive queues owned by an id, with the completion
// queues and channels the library creates when the application gives none.
#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "core/id_state.h"
#include "core/multicast.h"
#include "core/objects.h"
#include "core/qp_state.h"

namespace rdmacm::core {
namespace {

int last_errno() { return errno ? -errno : -ENOMEM; }

void destroy_cqs(rdma_cm_id& id) {
  if (id.recv_cq) {
    ibv_destroy_cq(id.recv_cq);
    if (id.send_cq && id.send_cq != id.recv_cq) ibv_destroy_cq(id.send_cq);
  } else if (id.send_cq) {
    ibv_destroy_cq(id.send_cq);
  }
  id.recv_cq = id.send_cq = nullptr;
  if (id.recv_cq_channel) {
    ibv_destroy_comp_channel(id.recv_cq_channel);
    if (id.send_cq_channel && id.send_cq_channel != id.recv_cq_channel)
      ibv_destroy_comp_channel(id.send_cq_channel);
  } else if (id.send_cq_channel) {
    ibv_destroy_comp_channel(id.send_cq_channel);
  }
  id.recv_cq_channel = id.send_cq_channel = nullptr;
}

// One CQ with its own completion channel, as rdma-core creates them.
int create_cq(rdma_cm_id& id, uint32_t size, ibv_comp_channel** channel, ibv_cq** cq) {
  errno = 0;
  if (!(*channel = ibv_create_comp_channel(id.verbs))) return last_errno();
  if (!(*cq = ibv_create_cq(id.verbs, static_cast<int>(size), &id, *channel, 0)))
    return last_errno();
  return 0;
}

int create_cqs(rdma_cm_id& id, uint32_t send_size, uint32_t recv_size) {
  int err = 0;
  if (recv_size) err = create_cq(id, recv_size, &id.recv_cq_channel, &id.recv_cq);
  if (!err && send_size) err = create_cq(id, send_size, &id.send_cq_channel, &id.send_cq);
  if (err) destroy_cqs(id);
  return err;
}

// The id takes a QP just made on its device: in INIT, its ECE read.
int take_qp(CmId& id, ibv_qp* qp) {
  ibv_ece ece{};
  if (!ibv_query_ece(qp, &ece)) {
    id.local_ece.vendor_id = ece.vendor_id;
    id.local_ece.attr_mod = ece.options;
  }
  if (int err = modify_qp_init(id, qp)) return err;
  id.pub.pd = qp->pd;
  id.pub.qp = qp;
  return 0;
}

}  // namespace

int create_qp_ex(rdma_cm_id* pub, ibv_qp_init_attr_ex* attr) {
  auto id = find_id(pub);
  if (!id || !attr) return -EINVAL;
  rdma_cm_id& p = id->pub;
  if (p.qp || !p.verbs) return -EINVAL;  // one QP per id, on a bound device
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = p.pd;
  } else if (attr->pd->context != p.verbs) {
    return -EINVAL;
  }
  if ((p.recv_cq && attr->recv_cq && p.recv_cq != attr->recv_cq) ||
      (p.send_cq && attr->send_cq && p.send_cq != attr->send_cq))
    return -EINVAL;
  if (p.qp_type == IBV_QPT_XRC_RECV) return -EOPNOTSUPP;
  // Every QP needs a send CQ, and all but XRC send QPs a receive CQ: the
  // library makes one only for a nonzero max_*_wr. rdma-core hands verbs a
  // NULL CQ here and crashes.
  bool send_cq = attr->send_cq || p.send_cq || attr->cap.max_send_wr;
  bool recv_cq = attr->recv_cq || p.recv_cq || attr->cap.max_recv_wr ||
                 attr->qp_type == IBV_QPT_XRC_SEND;
  if (!send_cq || !recv_cq) return -EINVAL;

  if (int err = create_cqs(p, attr->send_cq || p.send_cq ? 0 : attr->cap.max_send_wr,
                           attr->recv_cq || p.recv_cq ? 0 : attr->cap.max_recv_wr))
    return err;
  if (!attr->send_cq) attr->send_cq = p.send_cq;
  if (!attr->recv_cq) attr->recv_cq = p.recv_cq;
  if (p.srq && !attr->srq) attr->srq = p.srq;

  errno = 0;
  ibv_qp* qp = ibv_create_qp_ex(p.verbs, attr);
  if (!qp) {
    int err = last_errno();
    destroy_cqs(p);
    return err;
  }
  if (int err = take_qp(*id, qp)) {
    ibv_destroy_qp(qp);
    destroy_cqs(p);
    return err;
  }
  return 0;
}

int attach_qp(rdma_cm_id* pub, ibv_qp* qp) {
  auto id = find_id(pub);
  if (!id || !qp) return -EINVAL;
  rdma_cm_id& p = id->pub;
  if (p.qp || !p.verbs || qp->context != p.verbs || qp->qp_type != p.qp_type) return -EINVAL;
  return take_qp(*id, qp);
}

int create_qp(rdma_cm_id* pub, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!attr) return -EINVAL;
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof(*attr));
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;  // none: create_qp_ex takes the id's (after validating the id)
  int err = create_qp_ex(pub, &ex);
  std::memcpy(attr, &ex, sizeof(*attr));  // the caps the device granted
  return err;
}

int destroy_qp(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id || !id->pub.qp) return -EINVAL;
  // rdma-core destroys the QP of an id still in a group as it is: the
  // kernel refuses (EBUSY) and the QP and its CQs leak.
  detach_groups(*id);
  ibv_destroy_qp(id->pub.qp);
  id->pub.qp = nullptr;
  destroy_cqs(id->pub);
  return 0;
}

int create_srq_ex(rdma_cm_id* pub, ibv_srq_init_attr_ex* attr) {
  auto id = find_id(pub);
  if (!id || !attr || !id->pub.verbs) return -EINVAL;
  rdma_cm_id& p = id->pub;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return -EINVAL;
  if (p.srq) return -EINVAL;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = p.pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if (attr->srq_type == IBV_SRQT_XRC) return -EOPNOTSUPP;
  errno = 0;
  ibv_srq* srq = ibv_create_srq_ex(p.verbs, attr);
  if (!srq) return last_errno();
  if (!p.pd) p.pd = attr->pd;
  p.srq = srq;
  return 0;
}

int create_srq(rdma_cm_id* pub, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!attr) return -EINVAL;
  ibv_srq_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof(*attr));
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd;
  int err = create_srq_ex(pub, &ex);
  std::memcpy(attr, &ex, sizeof(*attr));
  return err;
}

int destroy_srq(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id || !id->pub.srq) return -EINVAL;
  ibv_destroy_srq(id->pub.srq);
  id->pub.srq = nullptr;
  destroy_cqs(id->pub);
  return 0;
}

}  // namespace rdmacm::core
