// What both socket kinds put on an id: one completion channel, one CQ for
// sends and receives on it (armed from the start: a thread already asleep
// on the channel wakes for the first completion), and a QP on that CQ
// (every send signalled, or only those that ask). They can be made before
// the id exists (a stream endpoint made ahead: endpoint_spares.h) and given
// to it later. Torn down the same way, whatever part was made.
//
// The CQ holds a completion for every send and receive that can be
// outstanding at once (a QP that fails flushes them all, quiet sends too):
// sq + rq entries, or fewer where the caller keeps fewer outstanding and
// deepens the CQ with them (grow_cq) - on a device that can resize a CQ.
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
  // Made in the background (a stream endpoint made ahead): the channel's
  // descriptor moved out of the numbers a program counts on at once.
  bool channel_high = false;
  // The CQ's entries at first: 0 for sq + rq (the QP's depths). Fewer only
  // where the device resizes CQs (else sq + rq all the same).
  uint32_t cq_entries = 0;
};

// The three, not yet an id's.
struct QueuePair {
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;  // in RESET
  uint32_t cq_entries = 0;  // what the CQ was made for
};

// Makes them on pd, with queue depths and inline bytes from sizes;
// sizes->sq_inline becomes what the device granted (as rdma-core 44). 0 or
// -errno; on failure *out holds what was made, for free_queue_pair.
int make_queue_pair(ibv_pd* pd, const QueuePairShape& shape, Sizes* sizes, QueuePair* out);
void free_queue_pair(QueuePair* q);
// The CQ made for more entries (never fewer than it holds): 0 or -errno.
int grow_cq(ibv_cq* cq, uint32_t entries);
// The id takes them (emptying *q): its CQ and channel fields, the QP through
// core::attach_qp (to INIT). On failure the QP is destroyed and the id keeps
// the rest, for destroy_queue_pair.
int attach_queue_pair(rdma_cm_id* id, QueuePair* q);

// make_queue_pair on the id's PD, then attach_queue_pair.
int create_queue_pair(rdma_cm_id* id, const QueuePairShape& shape, Sizes* sizes);

// unacked: CQ events taken and not acknowledged yet.
void destroy_queue_pair(rdma_cm_id* id, unsigned unacked);

}  // namespace rdmacm::rsocket
