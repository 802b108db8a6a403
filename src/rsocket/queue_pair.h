// What both socket kinds put on an id: one completion channel, one CQ for
// sends and receives on it (armed from the start: a thread already asleep
// on the channel wakes for the first completion), and a QP on that CQ
// (every send signalled, or only those that ask). Torn down the same way,
// whatever part was made.
#pragma once

#include <rdma/rdma_cma.h>

#include "rsocket/sizes.h"

namespace rdmacm::rsocket {

struct QueuePairShape {
  ibv_qp_type type;
  uint32_t send_sge, recv_sge;
  bool nonblocking_channel;  // ibv_get_cq_event answers EAGAIN instead of sleeping
  void* context;             // the QP's qp_context
  bool signal_all = true;    // else only sends with IBV_SEND_SIGNALED complete when fine
};

// Queue depths and inline bytes from sizes; sizes->sq_inline becomes what
// the device granted (as rdma-core 44). 0 or -errno; on failure the id keeps
// what was made, for destroy_queue_pair.
int create_queue_pair(rdma_cm_id* id, const QueuePairShape& shape, Sizes* sizes);

// unacked: CQ events taken and not acknowledged yet.
void destroy_queue_pair(rdma_cm_id* id, unsigned unacked);

}  // namespace rdmacm::rsocket
