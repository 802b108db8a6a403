#include "rsocket/endpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "rsocket/buffers.h"

namespace rdmacm::rsocket {
namespace {

ibv_mr* register_buffer(ibv_pd* pd, void* addr, size_t len, bool remote_write) {
  int access = IBV_ACCESS_LOCAL_WRITE | (remote_write ? IBV_ACCESS_REMOTE_WRITE : 0);
  return ibv_reg_mr(pd, addr, len, access);
}

int last_error() { return errno ? -errno : -ENOMEM; }

}  // namespace

bool EndpointShape::operator==(const EndpointShape& o) const {
  return pd == o.pd && sizes.sbuf_size == o.sizes.sbuf_size &&
         sizes.rbuf_size == o.sizes.rbuf_size && sizes.sq_size == o.sizes.sq_size &&
         sizes.rq_size == o.sizes.rq_size && sizes.sq_inline == o.sizes.sq_inline &&
         sizes.sq_size_asked == o.sizes.sq_size_asked &&
         sizes.rq_size_asked == o.sizes.rq_size_asked &&
         iomap_size == o.iomap_size && msg_send == o.msg_send;
}

size_t EndpointShape::rbuf_total() const {
  return sizes.rbuf_size + (msg_send ? size_t{sizes.rq_size} * wire::kMsgSize : 0);
}

size_t EndpointShape::target_len() const {
  return sizeof(wire::Sge) * wire::kTargetSglSize + sizeof(wire::IomapEntry) * iomap_size;
}

int make_endpoint(const EndpointShape& shape, Endpoint* out, bool ahead) {
  // Every send signals only if asked; the channel blocks (the socket sets
  // it as its own flags say when it takes the endpoint); the QP's context
  // is the socket's, set then too.
  Sizes granted = shape.sizes;
  if (!granted.sq_size_asked) granted.sq_size = std::min(granted.sq_size, kUnaskedDepth);
  if (!granted.rq_size_asked) granted.rq_size = std::min(granted.rq_size, kUnaskedDepth);
  uint16_t sq = granted.sq_size, rq = granted.rq_size;
  uint16_t sq_start = std::min(sq, kStartSendDepth), rq_start = std::min(rq, kStartRecvDepth);
  uint32_t cq = shape.msg_send ? 0u : sq_start + rq_start;
  if (int err = make_queue_pair(shape.pd, {IBV_QPT_RC, 2, 1, false, nullptr, false, ahead, cq},
                                &granted, &out->qp))
    return err;
  bool shallow = out->qp.cq_entries < uint32_t{sq} + rq;
  out->sq_depth = shallow ? sq_start : sq;
  out->sq_max = sq;
  out->rq_max = rq;
  out->rq_depth = shallow ? rq_start : rq;
  out->sq_inline = granted.sq_inline;
  if (shape.msg_send && out->sq_inline < wire::kMsgSize) return -ENOTSUP;
  errno = 0;
  out->rbuf = static_cast<uint8_t*>(forksafe_alloc(shape.rbuf_total()));
  out->target_sgl = static_cast<wire::Sge*>(forksafe_alloc(shape.target_len()));
  if (!out->rbuf || !out->target_sgl) return -ENOMEM;
  out->rmr = register_buffer(shape.pd, out->rbuf, shape.rbuf_total(), true);
  out->target_mr = register_buffer(shape.pd, out->target_sgl, shape.target_len(), true);
  if (!out->rmr || !out->target_mr) return last_error();
  if (out->sq_inline < wire::kMaxCtrlMessage) {
    size_t len = wire::kMaxCtrlMessage * wire::kCtrlMessages;
    out->ctrl_slots = static_cast<uint8_t*>(forksafe_alloc(len));
    if (!out->ctrl_slots) return -ENOMEM;
    out->ctrl_mr = register_buffer(shape.pd, out->ctrl_slots, len, false);
    if (!out->ctrl_mr) return last_error();
  }
  return out->sbuf.init(shape.pd, IBV_ACCESS_LOCAL_WRITE, shape.sizes.sbuf_size);
}

void Endpoint::deregister() {
  sbuf.clear();
  for (ibv_mr** mr : {&ctrl_mr, &rmr, &target_mr}) {
    if (*mr) ibv_dereg_mr(*mr);
    *mr = nullptr;
  }
}

Endpoint::~Endpoint() {
  deregister();
  free_queue_pair(&qp);
  std::free(ctrl_slots);
  std::free(rbuf);
  std::free(target_sgl);
}

void Endpoint::swap(Endpoint& o) noexcept {
  std::swap(qp, o.qp);
  std::swap(sq_depth, o.sq_depth);
  std::swap(rq_depth, o.rq_depth);
  std::swap(sq_max, o.sq_max);
  std::swap(rq_max, o.rq_max);
  std::swap(sq_inline, o.sq_inline);
  std::swap(rbuf, o.rbuf);
  std::swap(rmr, o.rmr);
  std::swap(target_sgl, o.target_sgl);
  std::swap(target_mr, o.target_mr);
  std::swap(ctrl_slots, o.ctrl_slots);
  std::swap(ctrl_mr, o.ctrl_mr);
  sbuf = std::move(o.sbuf);
}

}  // namespace rdmacm::rsocket
