#include "rsocket/queue_pair.h"

#include <fcntl.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "core/cm.h"
#include "common/mutex.h"
#include "rsocket/kernel_fds.h"

namespace rdmacm::rsocket {
namespace {

// Whether a device's CQs resize (rxe, mlx4, mlx5 do; siw and others say
// EOPNOTSUPP), learnt from its first CQ made small: resized to its own size.
class Resizers {
 public:
  bool can_resize(ibv_cq* cq) EXCLUDES(mutex_) {
    std::string name = ibv_get_device_name(cq->context->device);
    LockGuard lock(mutex_);
    for (const auto& [device, yes] : known_)
      if (device == name) return yes;
    bool yes = ibv_resize_cq(cq, cq->cqe) == 0;
    known_.emplace_back(name, yes);
    return yes;
  }

 private:
  Mutex mutex_;
  std::vector<std::pair<std::string, bool>> known_ GUARDED_BY(mutex_);
};

Resizers& resizers() {
  static auto* r = new Resizers;  // never destroyed: endpoints are made until exit
  return *r;
}

ibv_cq* make_cq(ibv_pd* pd, uint32_t entries, ibv_comp_channel* channel) {
  return ibv_create_cq(pd->context, static_cast<int>(entries), nullptr, channel, 0);
}

}  // namespace

int make_queue_pair(ibv_pd* pd, const QueuePairShape& shape, Sizes* sizes, QueuePair* out) {
  errno = 0;
  out->channel = ibv_create_comp_channel(pd->context);
  if (!out->channel) return errno ? -errno : -ENOMEM;
  if (shape.channel_high) out->channel->fd = move_high(out->channel->fd);
  if (shape.nonblocking_channel) {
    int flags = fcntl(out->channel->fd, F_GETFL);
    if (flags < 0 || fcntl(out->channel->fd, F_SETFL, flags | O_NONBLOCK)) return -errno;
  }
  uint32_t full = uint32_t{sizes->sq_size} + sizes->rq_size;
  out->cq_entries = shape.cq_entries && shape.cq_entries < full ? shape.cq_entries : full;
  out->cq = make_cq(pd, out->cq_entries, out->channel);
  if (out->cq && out->cq_entries < full && !resizers().can_resize(out->cq)) {
    ibv_destroy_cq(out->cq);
    out->cq = make_cq(pd, out->cq_entries = full, out->channel);
  }
  if (!out->cq) return errno ? -errno : -ENOMEM;
  ibv_req_notify_cq(out->cq, 0);

  ibv_qp_init_attr attr{};
  attr.qp_context = shape.context;
  attr.send_cq = out->cq;
  attr.recv_cq = out->cq;
  attr.qp_type = shape.type;
  attr.sq_sig_all = shape.signal_all;
  attr.cap.max_send_wr = sizes->sq_size;
  attr.cap.max_recv_wr = sizes->rq_size;
  attr.cap.max_send_sge = shape.send_sge;
  attr.cap.max_recv_sge = shape.recv_sge;
  attr.cap.max_inline_data = sizes->sq_inline;
  out->qp = ibv_create_qp(pd, &attr);
  if (!out->qp) return errno ? -errno : -ENOMEM;
  sizes->sq_inline = static_cast<uint16_t>(attr.cap.max_inline_data);
  return 0;
}

void free_queue_pair(QueuePair* q) {
  if (q->qp) ibv_destroy_qp(q->qp);
  if (q->cq) ibv_destroy_cq(q->cq);
  if (q->channel) ibv_destroy_comp_channel(q->channel);
  *q = {};
}

int grow_cq(ibv_cq* cq, uint32_t entries) {
  errno = 0;
  if (int err = ibv_resize_cq(cq, static_cast<int>(entries))) return err > 0 ? -err : errno ? -errno : -EIO;
  return 0;
}

int attach_queue_pair(rdma_cm_id* id, QueuePair* q) {
  q->cq->cq_context = id;
  id->recv_cq_channel = id->send_cq_channel = std::exchange(q->channel, nullptr);
  id->recv_cq = id->send_cq = std::exchange(q->cq, nullptr);
  ibv_qp* qp = std::exchange(q->qp, nullptr);
  if (int err = core::attach_qp(id, qp)) {
    ibv_destroy_qp(qp);
    return err;
  }
  return 0;
}

int create_queue_pair(rdma_cm_id* id, const QueuePairShape& shape, Sizes* sizes) {
  if (!id->pd) return -ENODEV;
  QueuePair q;
  if (int err = make_queue_pair(id->pd, shape, sizes, &q)) {
    free_queue_pair(&q);
    return err;
  }
  return attach_queue_pair(id, &q);
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
