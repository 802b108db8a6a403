// Stream rsockets' handshake: the active side's steps (address, route,
// connect, the peer's connection data), the endpoint both sides make before
// they exchange connection data, and that data (protocol.h's ConnData).
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "rsocket/endpoint_spares.h"
#include "rsocket/kernel_fds.h"
#include "rsocket/poll.h"
#include "rsocket/queue_pair.h"
#include "rsocket/stream.h"

namespace rdmacm::rsocket {
namespace {

constexpr int kConnRetries = 6;
// Address resolution waits for the neighbour (ARP, ND), which the kernel
// gives up on after three probes a second apart: TCP's connect to an
// on-link address nobody answers says EHOSTUNREACH after ~3 s. Two tries
// (1 s, then 2 s) say the same; rdma-core's non-blocking connect tries
// seven times (127 s) and its blocking one once (ETIMEDOUT after 1 s).
constexpr int kAddrTries = 2;
constexpr uint16_t kQpMinSize = 16;

}  // namespace

int StreamSocket::advance_connect(bool wait) {
  if (!connect_mutex_.try_lock()) {
    // Another thread's connect is under way (a blocking one holds the lock
    // to its end): the kernel's SYN_SENT, which a blocking recv or send
    // waits out and poll reports not ready.
    if (!wait) return -EINPROGRESS;
    connect_mutex_.lock();
  }
  int err = connect_step();
  connect_mutex_.unlock();
  return err;
}

// The kernel's connect(2) waits at most the socket's send timeout, then says
// EINPROGRESS (EINTR if a signal came first) and goes on connecting: poll
// says when it ended, and another connect says EALREADY (a blocking one
// after waiting again: wait_connect_end). Here the steps of a bounded
// connect run as a non-blocking socket's, each event waited for until the
// bound; past it the connection service follows them.
int StreamSocket::connect_within_timeout() {
  bool again = (state_ & kOpening) != 0;  // a connect already under way
  uint64_t us = timeouts_.send_us();
  if ((fd_flags_ & O_NONBLOCK) || again || us == Timeouts::kNone) {
    int err = connect_step();
    return err == -EINPROGRESS && again ? -EALREADY : err;
  }
  int fd = id_->channel->fd;
  if (int err = set_fd_nonblocking(fd, true)) return err;
  uint64_t deadline = Timeouts::deadline(us);
  for (;;) {
    int err = connect_step();
    if (err != -EINPROGRESS) return err;
    int ms = Timeouts::poll_ms(deadline);
    if (!ms) return -EINPROGRESS;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) < 0 && errno == EINTR) return -EINTR;
  }
}

int StreamSocket::wait_connect_end(uint64_t us, int at_bound) {
  uint64_t deadline = Timeouts::deadline(us);
  while (state_ & kOpening) {
    int ms = Timeouts::poll_ms(deadline);
    if (!ms) return at_bound;
    pollfd p{fd_, POLLOUT, 0};
    if (int n = rsocket::poll(&p, 1, ms); n < 0) return n;
  }
  return 0;
}

// One step of the active side's handshake: resolve the address, the route,
// connect, and read the peer's connection data. A non-blocking socket leaves
// each step pending (EINPROGRESS) and the CM service (or the application's
// next call) comes back here when the step's event arrives.
int StreamSocket::connect_step() {
  int err = 0;
  switch (state_) {
    case kInit:
    case kBound:
      // Opening, to every other thread, from here to the end (a blocking
      // connect runs to it in this call): left in kInit, a recv from
      // another thread said ENOTCONN, and poll "hung up", while the
      // connect was about to succeed (CPython's TCPCloserTest, whose
      // server thread reads the client's socket).
      state_ = kResolvingAddr;
    resolve_addr:
      err = core::resolve_addr(id_, nullptr, &id_->route.addr.dst_addr, 1000 << retries_++);
      if (err == -EAGAIN || err == -EINTR) {
        state_ = kResolvingAddr;
        break;
      }
      goto addr_resolved;  // a blocking socket's wait ended (or the call failed)
    case kResolvingAddr:
      err = core::complete_pending(id_);
    addr_resolved:
      if (err == -ETIMEDOUT) {
        if (retries_ < kAddrTries) goto resolve_addr;
        err = -EHOSTUNREACH;
      }
      if (err) break;
      retries_ = 0;
    resolve_route:
      if (!route_.empty()) {
        err = core::set_option(id_, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, route_.data(),
                               route_.size());
        route_.clear();
        if (!err) {
          state_ = kResolvingRoute;
          goto route_resolving;
        }
      } else {
        err = core::resolve_route(id_, 1000 << retries_++);
        if (!err) goto do_connect;
      }
      if (err == -EAGAIN || err == -EINTR) state_ = kResolvingRoute;
      break;
    case kResolvingRoute:
    route_resolving:
      if ((err = core::complete_pending(id_))) {
        if (err == -ETIMEDOUT && retries_ <= kConnRetries) goto resolve_route;
        break;
      }
    do_connect: {
      if ((err = create_endpoint())) break;
      wire::ConnData data;
      format_conn_data(&data);
      size_t offset = conn_data_offset(id_);  // the kernel fills the IB CM header
      uint8_t buf[wire::kIbConnectHeaderSize + sizeof(wire::ConnData)] = {};
      std::memcpy(buf + offset, &data, sizeof(data));
      rdma_conn_param param{};
      param.private_data = buf;
      param.private_data_len = static_cast<uint8_t>(offset + sizeof(data));
      param.flow_control = 1;
      param.retry_count = 7;
      param.rnr_retry_count = 7;
      if (msg_send_) param.initiator_depth = 1;  // iWARP reads during the connect (rdma-core 44)
      retries_ = 0;
      err = core::connect(id_, &param);
      if (!err) goto connected;
      if (err == -EAGAIN || err == -EINTR) state_ = kConnecting;
      break;
    }
    case kConnecting:
      if ((err = core::complete_pending(id_))) break;
    connected: {
      const rdma_conn_param& resp = id_->event->param.conn;
      wire::ConnData cresp{};
      if (!resp.private_data || resp.private_data_len < sizeof(cresp)) {
        err = -ENOTSUP;
        break;
      }
      std::memcpy(&cresp, resp.private_data, sizeof(cresp));
      if (cresp.version != wire::kVersion) {
        err = -ENOTSUP;
        break;
      }
      save_conn_data(cresp);
      state_ = kConnectedRdWr;
      break;
    }
    case kAccepting:
      if (!(fd_flags_ & O_NONBLOCK)) set_fd_nonblocking(id_->channel->fd, true);
      if ((err = core::complete_pending(id_))) break;
      state_ = kConnectedRdWr;
      break;
    case kConnectError:
    case kDisconnected:
    case kError:
      return -ENOTCONN;
    default:
      return (state_ & kConnected) ? 0 : -EINVAL;
  }
  if (err == -EAGAIN) return -EINPROGRESS;
  // A signal in a blocking connect's wait: connect(2) says EINTR and the
  // handshake goes on (its step's event is still to come).
  if (err == -EINTR && (state_ & kOpening)) return err;
  if (err) {
    state_ = kConnectError;
    err_ = -err;
  }
  return err;
}

int StreamSocket::create_endpoint() {
  if (!id_->pd) return -ENODEV;
  sizes_.fit_queues(core::max_qp_wr(id_), kQpMinSize);
  // iWARP has no RDMA write with immediate data: each message is a SEND
  // (stream_queue.cpp), as rdma-core 44's RS_OPT_MSG_SEND.
  msg_send_ = id_->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
  EndpointShape shape{id_->pd, sizes_, target_iomap_size_, msg_send_};
  if (take_spare(shape, &ep_))
    core::trace_rsocket(fd_, "takes an endpoint made ahead", 0);
  else if (int err = make_endpoint(shape, &ep_))
    return err;
  endpoint_made(shape, id_);
  sizes_.sq_inline = ep_.sq_inline;
  if (int err = attach_queue_pair(id_, &ep_.qp)) return err;
  id_->qp->qp_context = this;
  if (fd_flags_ & O_NONBLOCK)
    if (int err = set_fd_nonblocking(id_->recv_cq_channel->fd, true)) return err;
  rmsg_.assign(sizes_.rq_size + 1u, 0);

  LockGuard lock(cq_mutex_);  // the data path's counters (no completion can come yet)
  empty_send_ring();
  rbuf_free_offset_ = static_cast<int>(sizes_.rbuf_size >> 1);
  rbuf_bytes_avail_ = static_cast<int>(sizes_.rbuf_size >> 1);
  sq_depth_ = ep_.sq_depth;
  rq_depth_ = ep_.rq_depth;
  sqe_avail_ = sq_depth_ - static_cast<int>(ctrl_max_seqno_);
  adopted_.assign(ep_.sq_max, {});  // at most one per send in flight
  rseq_comp_ = rq_depth_ >> 1;
  rseq_granted_ = rq_depth_;                         // the credits in our connection data
  rbuf_granted_ = sizes_.rbuf_size >> 1;             // and its data buffer
  for (int i = 0; i < rq_depth_; ++i)
    if (int err = post_recv()) return err;
  return 0;
}

void StreamSocket::format_conn_data(wire::ConnData* out) const {
  *out = wire::encode_conn_data(
      ep_.rq_depth, target_iomap_size_,
      {reinterpret_cast<uintptr_t>(ep_.target_sgl), ep_.target_mr->rkey, wire::kTargetSglSize},
      {reinterpret_cast<uintptr_t>(ep_.rbuf), ep_.rmr->rkey, sizes_.rbuf_size >> 1});
}

void StreamSocket::save_conn_data(const wire::ConnData& in) {
  wire::PeerConnData peer = wire::decode_conn_data(in);
  LockGuard lock(cq_mutex_);
  remote_sgl_ = peer.target_sgl;
  remote_sge_ = 1;
  swap_sgl_ = peer.swap_sgl;
  remote_iomap_ = peer.iomap;
  ep_.target_sgl[0] = peer.data_buf;
  sseq_comp_ = peer.credits;
}

}  // namespace rdmacm::rsocket
