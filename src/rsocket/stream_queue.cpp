// Stream rsockets' QP traffic, below the data path and the handshake:
// posting RDMA writes (with immediate data into the peer's receive buffer,
// plain for riowrite), credits and control messages, and taking what
// completed (CompletionWait's reap, arm and sleep_on_cq).
//
// Completions: every send is signalled but data messages, of which only one
// in kSignalEvery is, or one that leaves the send queue or send buffer half
// used or more, or no control slot free (rdma-core 44 signals every send).
// A signalled send's completion also gives back what the quiet ones before
// it held (RC completes a queue's sends in order): it "adopts" them
// (kAdoptsFlag; what it adopted waits in adopted_, in posting order). So a
// caller that waits for room always has a signalled send ahead of it, and
// one that waits for every send to end fences the quiet ones first
// (fence_sends).
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "rsocket/stream.h"
#include "rsocket/stream_service.h"

namespace rdmacm::rsocket {
namespace {

constexpr uint64_t kRecvFlag = 1ull << 63;     // a receive's wr_id (| its message slot)
constexpr uint64_t kMsgSendFlag = 1ull << 62;  // the SEND that follows a write on iWARP
constexpr uint64_t kAdoptsFlag = 1ull << 61;   // gives back the quiet sends before it
constexpr uint64_t kDataFlag = 1ull << 60;     // a data message's: nothing of its own to give back
constexpr int kSignalEvery = 64;

}  // namespace

// Every send goes here: a signalled one adopts the quiet ones before it.
int StreamSocket::post(ibv_send_wr& wr) {
  if (wr.send_flags & IBV_SEND_SIGNALED && quiet_.wrs) {
    adopted_[adopted_tail_] = quiet_;
    if (++adopted_tail_ == adopted_.size()) adopted_tail_ = 0;
    quiet_ = {};
    wr.wr_id |= kAdoptsFlag;
  }
  ibv_send_wr* bad;
  int err = ibv_post_send(id_->qp, &wr, &bad);
  return err > 0 ? -err : err;
}

// A data message holding sbuf_bytes of the send buffer: signalled (force:
// always), or quiet (see above).
StreamSocket::Signal StreamSocket::data_signal(uint32_t sbuf_bytes, bool force) {
  quiet_.wrs += message_wrs();
  quiet_.bytes += static_cast<int>(sbuf_bytes);
  bool signal = force || quiet_.wrs >= kSignalEvery || sqe_avail_ < sq_depth_ / 2 ||
                sbuf_bytes_avail_ < static_cast<int>(ep_.sbuf.size() / 2) || !ctrl_available();
  return signal ? Signal::data : Signal::quiet;
}

// Before a wait for every send to end: a signalled write of no bytes to the
// peer's target SGL (nothing it sees: no receive, no completion) adopts the
// quiet sends.
void StreamSocket::fence_sends() {
  if (!quiet_.wrs || sqe_avail_ < 1 || !(state_ & kConnected)) return;
  --sqe_avail_;
  ++quiet_.wrs;
  post_write(nullptr, 0, 0, 0, remote_sgl_.addr, remote_sgl_.key, false, Signal::data);
}

bool StreamSocket::wait_sends_done(int ms) {
  {
    LockGuard lock(cq_mutex_);
    fence_sends();
  }
  return wait_ms(&StreamSocket::all_sends_done, ms);
}

// RDMA writes with immediate data consume a receive with no buffer; on
// iWARP each message is a SEND of its immediate value (4 bytes, host order
// as rdma-core 44's) into one of rq_size slots past the receive buffer.
int StreamSocket::post_recv() {
  ibv_recv_wr wr{}, *bad;
  ibv_sge sge{};
  wr.wr_id = kRecvFlag;
  if (msg_send_) {
    wr.wr_id |= rbuf_msg_index_;
    sge.addr = reinterpret_cast<uintptr_t>(message_slot(rbuf_msg_index_));
    sge.length = wire::kMsgSize;
    sge.lkey = ep_.rmr->lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (++rbuf_msg_index_ == sizes_.rq_size) rbuf_msg_index_ = 0;
  }
  int err = ibv_post_recv(id_->qp, &wr, &bad);
  return err > 0 ? -err : err;
}

// The send queue in use (sends) or the receives posted, doubled up to the
// QP's depth: the CQ first, for a completion of every send and receive that
// may then be outstanding, then the receives. A CQ that cannot grow (out of
// memory) keeps them as they are; a receive that cannot be posted ends the
// connection.
void StreamSocket::deepen(bool sends) {
  auto doubled = [](int depth, int max) { return static_cast<uint16_t>(std::min(2 * depth, max)); };
  uint16_t sq = sends ? doubled(sq_depth_, ep_.sq_max) : sq_depth_;
  uint16_t rq = sends ? rq_depth_ : doubled(rq_depth_, ep_.rq_max);
  if ((sq == sq_depth_ && rq == rq_depth_) || grow_cq(id_->recv_cq, uint32_t{sq} + rq)) return;
  sqe_avail_ += sq - sq_depth_;
  sq_depth_ = sq;
  for (; rq_depth_ < rq; ++rq_depth_)
    if (int err = post_recv()) {
      state_ = kError;
      err_ = -err;
      return;
    }
}

// A message with no data of its own: a WRITE_WITH_IMM of nothing, or on
// iWARP a SEND of the immediate value.
int StreamSocket::post_message(uint32_t imm, uint64_t wr_id, Signal signal) {
  ibv_send_wr wr{};
  ibv_sge sge{reinterpret_cast<uintptr_t>(&imm), sizeof(imm), 0};
  wr.wr_id = wr_id;
  wr.send_flags = signal == Signal::quiet ? 0 : IBV_SEND_SIGNALED;
  if (msg_send_) {
    wr.opcode = IBV_WR_SEND;
    wr.send_flags |= IBV_SEND_INLINE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
  } else {
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htobe32(imm);
  }
  return post(wr);
}

// With immediate data on iWARP: the write (quiet), then the SEND that
// carries the value (its own send-queue entry: kMsgSendFlag in its wr_id,
// and no bytes of ours to give back when it completes).
int StreamSocket::post_write(ibv_sge* sgl, int nsge, uint32_t imm, int flags, uint64_t addr,
                             uint32_t rkey, bool with_imm, Signal signal) {
  bool then_send = with_imm && msg_send_;
  bool data = signal != Signal::own;
  ibv_send_wr wr{};
  wr.wr_id = data ? kDataFlag : imm;
  wr.sg_list = sgl;
  wr.num_sge = nsge;
  wr.opcode = with_imm && !msg_send_ ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = static_cast<unsigned>(flags);
  if (signal != Signal::quiet && !(then_send && data)) wr.send_flags |= IBV_SEND_SIGNALED;
  if (with_imm) wr.imm_data = htobe32(imm);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  int err = post(wr);
  if (err || !then_send) return err;
  uint64_t wr_id = data ? kDataFlag : wire::imm(wire::imm_op(imm), 0);
  return post_message(imm, wr_id | kMsgSendFlag, signal);
}

// Posts len bytes of buf as one RDMA write: inline when small enough, else
// copied into the send buffer ring (in two pieces where it wraps). The
// caller took len from sbuf_bytes_avail_ (inline too, as rdma-core 44).
int StreamSocket::post_from_sbuf(const void* buf, uint32_t len, uint32_t imm, uint64_t addr,
                                 uint32_t rkey, bool with_imm, Signal signal) {
  auto* in = static_cast<const uint8_t*>(buf);
  sbuf_posted_ += len;
  if (len <= sizes_.sq_inline) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(in), len, 0};
    return post_write(&sge, 1, imm, IBV_SEND_INLINE, addr, rkey, with_imm, signal);
  }
  auto ring = reinterpret_cast<uintptr_t>(ep_.sbuf.ring());
  auto to_end = static_cast<uint32_t>(ring + ep_.sbuf.size() - ssgl_[0].addr);
  ssgl_[0].lkey = ssgl_[1].lkey = ep_.sbuf.lkey();
  if (len <= to_end) {
    std::memcpy(reinterpret_cast<void*>(ssgl_[0].addr), in, len);
    ssgl_[0].length = len;
    int err = post_write(ssgl_, 1, imm, 0, addr, rkey, with_imm, signal);
    ssgl_[0].addr = len < to_end ? ssgl_[0].addr + len : ring;
    return err;
  }
  ssgl_[0].length = to_end;
  std::memcpy(reinterpret_cast<void*>(ssgl_[0].addr), in, to_end);
  ssgl_[1].length = len - to_end;
  std::memcpy(ep_.sbuf.ring(), in + to_end, ssgl_[1].length);
  int err = post_write(ssgl_, 2, imm, 0, addr, rkey, with_imm, signal);
  ssgl_[0].addr = ring + ssgl_[1].length;
  return err;
}

// The bytes in flight (inline ones counted too: more than lie in the ring)
// must end where the next write goes: the ring then goes on past its old
// end, and wraps at the new one.
void StreamSocket::grow_send_ring() {
  if (!sbuf_starved_ || ep_.sbuf.has_old()) return;
  uint32_t size = ep_.sbuf.size();
  auto at = static_cast<uint32_t>(ssgl_[0].addr - reinterpret_cast<uintptr_t>(ep_.sbuf.ring()));
  if (at < sbuf_in_flight()) return;
  sbuf_starved_ = false;
  if (!ep_.sbuf.grow()) return;
  sbuf_bytes_avail_ += static_cast<int>(ep_.sbuf.size() - size);
  sbuf_grow_mark_ = sbuf_posted_;
  sbuf_idle_mark_ = sbuf_posted_;
  if (!sbuf_idle_watched_) sbuf_idle_watched_ = watch(Watch::send_ring_idle, this) == 0;
}

// As TCP gives a connection's buffer back when it idles: a ring grown by
// bulk sends goes back to its first size once a look finds that it took no
// byte since the last one (kSendRingIdleMs) and holds none in flight, so an
// idle connection keeps its first few KiB pinned, not the configured size.
// A quiet send's bytes come back with a later signalled one: a fence (a
// signalled write of nothing, which the peer does not see) gives them back
// for the next look. The write position goes back to the ring's start.
bool StreamSocket::shrink_idle_send_ring() {
  LockGuard lock(cq_mutex_);
  if (state_ & kConnected) reap();
  if (!(state_ & kConnected) || !ep_.sbuf.grown()) {
    sbuf_idle_watched_ = false;
    return false;
  }
  if (sbuf_posted_ != sbuf_idle_mark_) {
    sbuf_idle_mark_ = sbuf_posted_;
    return true;
  }
  if (sbuf_in_flight() || ep_.sbuf.has_old()) {
    fence_sends();
    return true;
  }
  if (!ep_.sbuf.shrink()) return true;  // the registration failed: try again later
  empty_send_ring();
  sbuf_starved_ = false;
  sbuf_idle_watched_ = false;
  return false;
}

// Grants the peer more messages and, when half our receive buffer is free
// again, that half: written into the peer's target SGL.
void StreamSocket::send_credits() {
  ++ctrl_seqno_;
  // The peer spent every credit of the last grant: it may have waited for
  // this one, so this one allows more (the receives posted first).
  if (rseq_recv_ == rseq_granted_) deepen(false);
  rseq_comp_ = static_cast<uint16_t>(rseq_no_ + (rq_depth_ >> 1));
  rseq_granted_ = static_cast<uint16_t>(rseq_no_ + rq_depth_);
  uint32_t credit = wire::imm(wire::Op::sgl, rseq_granted_);
  if (rbuf_bytes_avail_ < static_cast<int>(sizes_.rbuf_size >> 1)) {
    post_message(credit, credit);
    return;
  }
  if (msg_send_) ++ctrl_seqno_;  // the write and its SEND
  wire::Sge sge{reinterpret_cast<uintptr_t>(&ep_.rbuf[rbuf_free_offset_]), ep_.rmr->rkey,
                sizes_.rbuf_size >> 1};
  if (swap_sgl_) sge = wire::byteswapped(sge);
  ibv_sge ib{};
  int flags = IBV_SEND_INLINE;
  ib.addr = reinterpret_cast<uintptr_t>(&sge);
  ib.length = sizeof(sge);
  if (sizes_.sq_inline < sizeof(sge)) {
    // Too big to inline: from a control slot of its own (ctrl_slot).
    uint8_t* slot = ctrl_slot(ctrl_seqno_);
    std::memcpy(slot, &sge, sizeof(sge));
    ib.addr = reinterpret_cast<uintptr_t>(slot);
    ib.lkey = ep_.ctrl_mr->lkey;
    flags = 0;
  }
  post_write(&ib, 1, credit, flags, remote_sgl_.addr + remote_sge_ * sizeof(wire::Sge),
             remote_sgl_.key, true);
  rbuf_bytes_avail_ -= static_cast<int>(sizes_.rbuf_size >> 1);
  rbuf_granted_ += sizes_.rbuf_size >> 1;
  rbuf_free_offset_ += static_cast<int>(sizes_.rbuf_size >> 1);
  if (rbuf_free_offset_ >= static_cast<int>(sizes_.rbuf_size)) rbuf_free_offset_ = 0;
  if (++remote_sge_ == remote_sgl_.length) remote_sge_ = 0;
}

// On iWARP a grant may take two control slots (rdma-core 44 asks for two
// either way).
bool StreamSocket::should_give_credits() const {
  bool slots = msg_send_ ? static_cast<int32_t>(ctrl_seqno_ + 1 - ctrl_max_seqno_) < 0
                         : ctrl_available();
  return (rbuf_bytes_avail_ >= static_cast<int>(sizes_.rbuf_size >> 1) ||
          static_cast<int16_t>(rseq_no_ - rseq_comp_) >= 0) &&
         slots && (state_ & kConnected);
}

void StreamSocket::update_credits() {
  if (should_give_credits()) send_credits();
}

bool StreamSocket::can_send() const {
  return sqe_avail_ >= message_wrs() && sbuf_bytes_avail_ >= static_cast<int>(wire::kSendLowWater) &&
         sseq_no_ != sseq_comp_ && ep_.target_sgl[target_sge_].length != 0;
}

bool StreamSocket::all_sends_done() const {
  return static_cast<int>(ctrl_max_seqno_ - ctrl_seqno_) + sqe_avail_ == sq_depth_ ||
         !(state_ & kConnected);
}

// One of the peer's messages, checked against the protocol and what we
// granted it: 0, or the errno that ends the connection (a peer that breaks
// the protocol is not read further: never bytes it did not send, never a
// counter it can run past). rdma-core 44 checks none of this.
int StreamSocket::take_message(const ibv_wc& wc, const char** why) {
  if (wc.status != IBV_WC_SUCCESS) {
    *why = "a receive failed";  // a SEND with a payload, or the QP died
    return ECONNRESET;
  }
  uint32_t msg;
  if (msg_send_) {
    *why = "a message that is not one 4-byte SEND";
    if (wc.opcode != IBV_WC_RECV || wc.byte_len != wire::kMsgSize) return EPROTO;
    std::memcpy(&msg, message_slot(static_cast<uint32_t>(wc.wr_id & ~kRecvFlag)), sizeof(msg));
  } else {
    *why = "a message without immediate data";
    if (!(wc.wc_flags & IBV_WC_WITH_IMM)) return EPROTO;
    msg = be32toh(wc.imm_data);
  }
  uint32_t data = wire::imm_data(msg);
  switch (wire::imm_op(msg)) {
    case wire::Op::sgl:
      sseq_comp_ = static_cast<uint16_t>(data);
      return 0;
    case wire::Op::iomap_sgl:
      // The peer wrote entry `data` of our iomap table (our riowrite reads it).
      *why = "an iomap entry past the table";
      if (data >= target_iomap_size_) return EPROTO;
      *why = "more messages than the credits granted";
      return take_credit() ? 0 : EPROTO;
    case wire::Op::ctrl:
      if (data == static_cast<uint32_t>(wire::Ctrl::disconnect)) {
        if (state_ & kWritable) peer_ended_.store(true, std::memory_order_release);
        state_ = kDisconnected;
      } else if (data == static_cast<uint32_t>(wire::Ctrl::shutdown)) {
        peer_shut_wr_.store(true, std::memory_order_release);
        if (state_ & kWritable)
          state_ &= ~kReadable;
        else
          state_ = kDisconnected;
      }
      return 0;  // a keep-alive, or a control value of a later version
    case wire::Op::data:
      *why = "more messages than the credits granted";
      if (!take_credit()) return EPROTO;
      *why = "a DATA message of no bytes";
      if (!data) return EPROTO;
      *why = "a DATA message past the receive window granted";
      if (data > rbuf_granted_) return EPROTO;
      rbuf_granted_ -= data;
      rmsg_[rmsg_tail_] = data;
      if (++rmsg_tail_ == sizes_.rq_size + 1) rmsg_tail_ = 0;
      return 0;
    default:
      *why = "a message of an unknown op";  // rdma-core 44 takes it as data
      return EPROTO;
  }
}

// A DATA or IOMAP_SGL message uses one of the credits our last grant allowed.
bool StreamSocket::take_credit() {
  if (rseq_recv_ == rseq_granted_) return false;
  ++rseq_recv_;
  return true;
}

// Ends the connection for a peer's fault: the application's next call gets
// err (once what arrived before it is read), rpoll POLLERR, and the peer a
// disconnect.
void StreamSocket::end_connection(int err, const char* why) {
  state_ = kError;
  err_ = err;
  core::trace_rsocket(fd_, why, err);
  core::disconnect(id_);
}

// Takes what completed: the peer's messages (data, credits, control) and our
// sends' completions. Reposts a receive for each message taken.
int StreamSocket::take_completions() {
  ibv_wc wc;
  int ret, taken = 0;
  while ((ret = ibv_poll_cq(id_->recv_cq, 1, &wc)) > 0) {
    if (wc.wr_id & kRecvFlag) {
      // What the peer delivered before it left is read, even when its
      // disconnect was taken first (the service thread takes it at once,
      // maybe before anyone looked at the CQ); after the disconnect a failed
      // receive is our flush. After a violation nothing more is read.
      if (!(state_ & kConnected) && (wc.status != IBV_WC_SUCCESS || (state_ & kError))) continue;
      ++taken;
      const char* why = nullptr;
      if (int err = take_message(wc, &why)) end_connection(err, why);
      continue;
    }
    if (wc.wr_id & kAdoptsFlag) {
      const Quiet& q = adopted_[adopted_head_];
      sqe_avail_ += q.wrs;
      sbuf_bytes_avail_ += q.bytes;
      if (++adopted_head_ == adopted_.size()) adopted_head_ = 0;
    }
    uint32_t sent = static_cast<uint32_t>(wc.wr_id);
    switch (wire::imm_op(sent)) {
      case wire::Op::sgl:
        ++ctrl_max_seqno_;
        break;
      case wire::Op::ctrl:
        ++ctrl_max_seqno_;
        if (wire::imm_data(sent) == static_cast<uint32_t>(wire::Ctrl::disconnect))
          state_ = kDisconnected;
        break;
      case wire::Op::iomap_sgl:
        ++sqe_avail_;
        if (!(wc.wr_id & kMsgSendFlag)) sbuf_bytes_avail_ += sizeof(wire::IomapEntry);
        break;
      default:  // riowrite's (a data message's own is all in its adoption)
        if (wc.wr_id & kDataFlag) break;
        ++sqe_avail_;
        sbuf_bytes_avail_ += static_cast<int>(wire::imm_data(sent));
        break;
    }
    if (wc.status != IBV_WC_SUCCESS && (state_ & kConnected)) {
      state_ = kError;
      err_ = EIO;
    }
  }
  // The send ring's previous registration, once nothing in flight uses it.
  if (ep_.sbuf.has_old() && sbuf_in_flight() <= sbuf_posted_ - sbuf_grow_mark_) ep_.sbuf.retire_old();
  if (state_ & kConnected) {
    while (!ret && taken--) ret = post_recv();
    if (ret) {
      state_ = kError;
      err_ = -ret;
    }
  }
  return ret < 0 ? ret : 0;
}

// CompletionWait's: credits granted before and after taking completions, as
// rdma-core 44's rs_process_cq does around its rs_poll_cq.
int StreamSocket::reap() {
  if (cq_failed_.exchange(false)) state_ = kError;
  update_credits();
  int ret = take_completions();
  update_credits();
  return ret;
}

void StreamSocket::arm() { ibv_req_notify_cq(id_->recv_cq, 0); }

int StreamSocket::sleep_on_cq(int ms) {
  if (ms >= 0) {
    pollfd p{id_->recv_cq_channel->fd, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return 0;
  }
  ibv_cq* cq;
  void* context;
  if (ibv_get_cq_event(id_->recv_cq_channel, &cq, &context)) {
    int err = errno;
    if (err != EAGAIN && err != EINTR) cq_failed_ = true;  // reap makes it the socket's
    return -err;
  }
  if (++unack_cqe_ >= sizes_.sq_size + sizes_.rq_size) {
    ibv_ack_cq_events(id_->recv_cq, static_cast<unsigned>(unack_cqe_));
    unack_cqe_ = 0;
  }
  return 1;
}

// Room for the next write (or the peer gone: ECONNRESET).
int StreamSocket::wait_send_room(int flags) {
  {
    LockGuard lock(cq_mutex_);
    if (can_send()) return 0;
    // Short of send-queue entries only: a deeper queue, where it may grow.
    if (sqe_avail_ < message_wrs() && (state_ & kConnected)) deepen(true);
    if (can_send()) return 0;
  }
  if (int err = wait(&StreamSocket::conn_can_send, nonblocking(flags), timeouts_.send_us())) return err;
  if (state_ & kWritable) return 0;
  return state_ & kError ? connection_error() : -ECONNRESET;
}

// A keep-alive probe is what rdma-core 44's tcp_svc_send_keepalive posts on
// every transport: an RDMA write of no bytes and no immediate data (rkey and
// address 0, which a zero-length write need not name). The peer's RDMA
// device answers it; its rsocket sees nothing and gives no receive for it,
// so a probe can never find the peer's receive queue empty (on iWARP a SEND
// that finds none ends the connection). Its completion gives the control
// slot back (wr_id: a CTRL KEEPALIVE message).
void StreamSocket::send_keepalive() {
  LockGuard lock(cq_mutex_);
  if (!(state_ & kConnected) || !ctrl_available()) return;
  ++ctrl_seqno_;
  uint32_t msg = wire::imm(wire::Op::ctrl, static_cast<uint32_t>(wire::Ctrl::keepalive));
  post_write(nullptr, 0, msg, 0, 0, 0, false);
}

// A slot freed by the wait may be taken by a keep-alive or a credit update
// before we lock again: then -ETIMEDOUT too, never a message silently lost.
int StreamSocket::send_ctrl(wire::Ctrl ctrl, int ms) {
  for (bool waited = false;; waited = true) {
    {
      LockGuard lock(cq_mutex_);
      if (!(state_ & kConnected)) return 0;
      if (ctrl_available()) {
        ++ctrl_seqno_;
        uint32_t imm = wire::imm(wire::Op::ctrl, static_cast<uint32_t>(ctrl));
        return post_message(imm, imm);
      }
    }
    if (waited || !wait_ms(&StreamSocket::conn_can_send_ctrl, ms)) return -ETIMEDOUT;
  }
}

}  // namespace rdmacm::rsocket
