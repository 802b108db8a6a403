// Floor: the QP transitions the library drives for an id's QP, with the
// attributes the kernel's rdma_cm computes (INIT_QP_ATTR). Every operation
// and the event pump move QPs only through these.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "core/objects.h"

namespace rdmacm::core {

// ibv_modify_qp as 0 / -errno.
int modify_qp(ibv_qp* qp, ibv_qp_attr& attr, int mask);
// A new QP: to INIT; a UD one on to RTS, since it needs no peer.
int modify_qp_init(CmId& id, ibv_qp* qp);
// The id's QP (if any) to RTR / RTS, with the negotiated depths
// (RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH: as the kernel computed).
int modify_qp_rtr(CmId& id, uint8_t responder_resources);
int modify_qp_rts(CmId& id, uint8_t initiator_depth);
// The id's QP (if any) to ERR / SQD.
int modify_qp_err(CmId& id);
int modify_qp_sqd(CmId& id);
// Active side, after the peer's response: QP to RTR and RTS, then RTU to the
// peer; QP to ERR if any step fails.
int finish_connect(CmId& id);

}  // namespace rdmacm::core
