#include "rsocket/queue_pair.h"

#include <fcntl.h>

#include <cerrno>

#include "core/cm.h"

namespace rdmacm::rsocket {

int create_queue_pair(rdma_cm_id* id, const QueuePairShape& shape, Sizes* sizes) {
  id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
  if (!id->recv_cq_channel) return errno ? -errno : -ENOMEM;
  id->send_cq_channel = id->recv_cq_channel;
  if (shape.nonblocking_channel) {
    int flags = fcntl(id->recv_cq_channel->fd, F_GETFL);
    if (flags < 0 || fcntl(id->recv_cq_channel->fd, F_SETFL, flags | O_NONBLOCK)) return -errno;
  }
  id->recv_cq = ibv_create_cq(id->verbs, sizes->sq_size + sizes->rq_size, id, id->recv_cq_channel, 0);
  if (!id->recv_cq) return errno ? -errno : -ENOMEM;
  id->send_cq = id->recv_cq;
  ibv_req_notify_cq(id->recv_cq, 0);

  ibv_qp_init_attr attr{};
  attr.qp_context = shape.context;
  attr.send_cq = id->send_cq;
  attr.recv_cq = id->recv_cq;
  attr.qp_type = shape.type;
  attr.sq_sig_all = shape.signal_all;
  attr.cap.max_send_wr = sizes->sq_size;
  attr.cap.max_recv_wr = sizes->rq_size;
  attr.cap.max_send_sge = shape.send_sge;
  attr.cap.max_recv_sge = shape.recv_sge;
  attr.cap.max_inline_data = sizes->sq_inline;
  if (int err = core::create_qp(id, nullptr, &attr)) return err;
  sizes->sq_inline = static_cast<uint16_t>(attr.cap.max_inline_data);
  return 0;
}

void destroy_queue_pair(rdma_cm_id* id, unsigned unacked) {
  if (id->recv_cq && unacked) ibv_ack_cq_events(id->recv_cq, unacked);
  if (id->qp) {
    core::destroy_qp(id);  // with the CQ and its channel
  } else {
    if (id->recv_cq) ibv_destroy_cq(id->recv_cq);
    if (id->recv_cq_channel) ibv_destroy_comp_channel(id->recv_cq_channel);
  }
  id->recv_cq = id->send_cq = nullptr;
  id->recv_cq_channel = id->send_cq_channel = nullptr;
}

}  // namespace rdmacm::rsocket
