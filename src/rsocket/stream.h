// Stream rsockets over RC QPs (the wire format is protocol.h's).
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "common/mutex.h"

#include "rsocket/completion_wait.h"
#include "rsocket/endpoint.h"
#include "rsocket/message.h"
#include "rsocket/protocol.h"
#include "rsocket/sizes.h"
#include "rsocket/socket.h"

namespace rdmacm::rsocket {

class StreamSocket final : public Socket, private CompletionWait<StreamSocket> {
 public:
  // States, ordered passive, opening, connected, closed (as rdma-core 44's).
  enum : int {
    kInit = 0,
    kBound = 0x0001,
    kListening = 0x0002,
    kOpening = 0x0004,
    kResolvingAddr = kOpening | 0x0010,
    kResolvingRoute = kOpening | 0x0020,
    kConnecting = kOpening | 0x0040,
    kAccepting = kOpening | 0x0080,
    kConnected = 0x0100,
    kWritable = 0x0200,
    kReadable = 0x0400,
    kConnectedRdWr = kConnected | kReadable | kWritable,
    kConnectError = 0x0800,
    kDisconnected = 0x1000,
    kError = 0x2000,
  };

  // A new socket (rsocket()); -errno in *err on failure.
  static StreamSocket* create(int domain, int* err);
  ~StreamSocket() override;

  int bind(const sockaddr* addr, socklen_t len) override;
  int listen(int backlog) override;
  int accept(sockaddr* addr, socklen_t* len) override;
  int connect(const sockaddr* addr, socklen_t len) override;
  // Up to kMaxMessage bytes, the buffers gathered into one send, so that
  // they arrive together as the kernel's one segment does (a reader of
  // writev's header and body saw the header alone: CPython's
  // testSendmsgGather under load); past it, the buffers in turn, until one
  // is not taken whole. A receive fills the buffers after the first only
  // with what is already there (rdma-core 44's rrecvv fills only the first).
  ssize_t sendmsg(const msghdr& msg, int flags) override {
    size_t total = msg.msg_iovlen > 1 ? message_total(msg) : 0;
    if (total && total <= kMaxMessage)
      return send_as_one(msg, [&](const void* buf, size_t len) { return send(buf, len, flags); });
    return in_turn(msg, [&](const iovec& b, bool) { return send(b.iov_base, b.iov_len, flags); });
  }
  ssize_t recvmsg(msghdr& msg, int flags) override {
    msg.msg_namelen = 0;  // no source per message, as TCP's
    return in_turn(msg, [&](const iovec& b, bool first) {
      return recv(b.iov_base, b.iov_len, first ? flags : flags | MSG_DONTWAIT);
    });
  }
  int shutdown(int how) override;
  void release(std::unique_ptr<File> self) override;
  int peer_name(sockaddr* addr, socklen_t* len) override;
  int sock_name(sockaddr* addr, socklen_t* len) override;
  int set_option(int level, int name, const void* value, socklen_t len) override;
  int get_option(int level, int name, void* value, socklen_t* len) override;
  int set_flags(int flags) override;
  off_t iomap(void* buf, size_t len, int prot, int flags, off_t offset) override;
  int iounmap(void* buf, size_t len) override;
  ssize_t iowrite(const void* buf, size_t len, off_t offset, int flags) override;
  short poll_state(short events) override;
  int wait_fd() override;
  void consume_wakeup() override;

  // For the services (stream_service.cpp): a listener's pending connection
  // requests, and a connected or connecting socket's CM events.
  void accept_requests();
  void handle_cm_event();
  // For the connection service: an accepted connection whose handshake did
  // not end within kAcceptTimeoutMs. Its listener drops it (deletes it).
  void accept_timed_out();
  // For the keep-alive service: a probe (a zero-byte RDMA write, as
  // rdma-core's) if connected and a control slot is free (a dead peer then
  // fails it: the socket errs).
  void send_keepalive();
  // For the connection service, kSendRingIdleMs after the send ring grew and
  // then as often while it stays grown (stream_queue.cpp): shrinks it once
  // it took no byte since the last look and holds none in flight; true to
  // look again.
  bool shrink_idle_send_ring();
  unsigned keepalive_interval() const {
    unsigned t = keepalive_time_;
    return t ? t : 7200;
  }
  // For the lingerer: one look at a lingering close, true once the peer has
  // closed its end or the linger time is over; then finish_close, the rest
  // of the teardown (the lingerer deletes the socket after it).
  bool linger_done();
  void finish_close();

 private:
  explicit StreamSocket(const StreamSocket* listener);

  // stream_connect.cpp: the handshake.
  // Drives the connect state machine one step; another thread's connect
  // under way: -EINPROGRESS at once, or (wait: the connection service) once
  // it ended.
  int advance_connect(bool wait = true) EXCLUDES(connect_mutex_);
  int connect_step() REQUIRES(connect_mutex_);
  // connect()'s: the steps until the end, or, on a blocking socket with
  // SO_SNDTIMEO, until that bound (-EINPROGRESS, or -EINTR for a signal:
  // the handshake goes on as a non-blocking one's).
  int connect_within_timeout() REQUIRES(connect_mutex_);
  // A blocking connect, receive or send while a handshake is under way
  // (another thread's blocking connect, or one going on behind: past its
  // bound, or interrupted): waits for its end, at most us (Timeouts'
  // microseconds: the call's SO_SNDTIMEO or SO_RCVTIMEO; at_bound then,
  // -EINTR for a signal), as TCP's.
  int wait_connect_end(uint64_t us, int at_bound) EXCLUDES(connect_mutex_);
  int create_endpoint();  // CQ, QP, buffers, posted receives
  void format_conn_data(wire::ConnData* out) const;
  void save_conn_data(const wire::ConnData& in);
  // Where our connection data starts in the private data: after the IB CM
  // header on AF_IB ids.
  static size_t conn_data_offset(const rdma_cm_id* id) {
    return id->route.addr.src_addr.sa_family == AF_IB ? wire::kIbConnectHeaderSize : 0;
  }
  bool set_nonblocking(bool on);  // stream.cpp
  // A listener's connection whose handshake ended (or ran out of time):
  // queued for raccept once connected, else dropped.
  void finish_accept(StreamSocket* s);
  void drop_unaccepted();  // the listener closes: every connection raccept did not take
  int stop_listening();    // shutdown of a listener
  // A paused listener with room again is watched again.
  void resume_if_room() REQUIRES(accept_mutex_);

  // stream_io.cpp: the data path; send and recv take one buffer.
  ssize_t recv(void* buf, size_t len, int flags);
  ssize_t send(const void* buf, size_t len, int flags);
  int send_direct(const uint8_t* in, size_t len, int flags, size_t* done) REQUIRES(send_mutex_);
  int write_data(const void* buf, uint32_t length, const ibv_mr* direct = nullptr)
      REQUIRES(cq_mutex_);

  // stream_queue.cpp: the QP's traffic.
  friend class CompletionWait<StreamSocket>;
  int reap() REQUIRES(cq_mutex_);
  void arm() REQUIRES(cq_mutex_);
  int sleep_on_cq(int ms) REQUIRES(cq_sleep_mutex_);
  int take_completions() REQUIRES(cq_mutex_);
  int take_message(const ibv_wc& wc, const char** why) REQUIRES(cq_mutex_);
  bool take_credit() REQUIRES(cq_mutex_);
  void end_connection(int err, const char* why) REQUIRES(cq_mutex_);
  // What a call on a connection that ended in error returns.
  int connection_error() const { return err_ ? -err_ : -ECONNRESET; }
  int wait_send_room(int flags);
  int post_recv() REQUIRES(cq_mutex_);
  // The sends outstanding (sends) or the receives posted doubled, up to the
  // QP's depths (stream_queue.cpp).
  void deepen(bool sends) REQUIRES(cq_mutex_);
  // Whether a send completes when fine (stream_queue.cpp): own (signalled,
  // gives back what it holds), or a data message's, signalled or quiet.
  enum class Signal { own, data, quiet };
  struct Quiet {
    int wrs, bytes;  // send-queue entries and send-buffer bytes held
  };
  int post(ibv_send_wr& wr) REQUIRES(cq_mutex_);
  Signal data_signal(uint32_t sbuf_bytes, bool force) REQUIRES(cq_mutex_);
  void fence_sends() REQUIRES(cq_mutex_);
  // Writes start small (the wire starts while the rest is copied) and double
  // up to kMaxTransfer, across calls (rsend's and riowrite's alike): a stream
  // of sends keeps its big writes (rdma-core 44 starts each call at
  // kFirstTransfer: ~14 us per extra write under Soft-RoCE).
  uint32_t next_write_size(size_t left) REQUIRES(send_mutex_) {
    if (left <= chunk_limit_) return static_cast<uint32_t>(left);
    uint32_t size = chunk_limit_;
    if (chunk_limit_ < wire::kMaxTransfer) chunk_limit_ <<= 1;
    return size;
  }
  bool wait_sends_done(int ms);  // fences, then waits up to ms for every send to complete
  int post_message(uint32_t imm, uint64_t wr_id, Signal signal = Signal::own) REQUIRES(cq_mutex_);
  int post_write(ibv_sge* sgl, int nsge, uint32_t imm, int flags, uint64_t addr, uint32_t rkey,
                 bool with_imm, Signal signal = Signal::own) REQUIRES(cq_mutex_);
  void send_credits() REQUIRES(cq_mutex_);
  // The send ring doubles once a send found it full, when the bytes in
  // flight lie before where the next write goes (they must not wrap).
  void grow_send_ring() REQUIRES(cq_mutex_);
  // Nothing in the send ring: the next write at its start, all of it free
  // (at connect, and once an idle ring shrank).
  void empty_send_ring() REQUIRES(cq_mutex_) {
    ssgl_[0].addr = ssgl_[1].addr = reinterpret_cast<uintptr_t>(ep_.sbuf.ring());
    sbuf_bytes_avail_ = static_cast<int>(ep_.sbuf.size());
  }
  // Send-ring bytes taken and not given back yet (inline sends' too).
  uint32_t sbuf_in_flight() const REQUIRES(cq_mutex_) {
    return ep_.sbuf.size() - static_cast<uint32_t>(sbuf_bytes_avail_);
  }
  // A write of up to want bytes through the send ring: what fits. A write
  // cut short, or one that leaves too little for the next (which then
  // waits for completions), marks the ring for growth; a stream of small
  // replies never does.
  uint32_t fit_send_ring(uint32_t want) REQUIRES(cq_mutex_) {
    grow_send_ring();
    auto avail = static_cast<uint32_t>(sbuf_bytes_avail_);
    if (want + wire::kSendLowWater > avail) sbuf_starved_ = true;
    return std::min(want, avail);
  }
  bool should_give_credits() const REQUIRES(cq_mutex_);
  void update_credits() REQUIRES(cq_mutex_);
  // A control message, once a control slot is free (waiting at most ms).
  int send_ctrl(wire::Ctrl ctrl, int ms);
  bool peer_closed() const { return !(state_ & kConnected); }

  // stream_iomap.cpp: buffers mapped for the peer's direct writes.
  struct Mapping {
    uint64_t offset;
    ibv_mr* mr;
    int index;  // its slot in the peer's iomap table; -1: local only
  };
  int send_iomaps(int flags) REQUIRES(send_mutex_);  // the new mappings, to the peer's table
  void release_mappings();
  int get_route(void* value, socklen_t* len);  // rgetsockopt(SOL_RDMA, RDMA_ROUTE)
  // Copies len bytes from buf to the send buffer (or inline) and posts them
  // as one write: with immediate data (imm) to the target, or plain.
  int post_from_sbuf(const void* buf, uint32_t len, uint32_t imm, uint64_t addr, uint32_t rkey,
                     bool with_imm, Signal signal = Signal::own) REQUIRES(cq_mutex_);

  // Tests for CompletionWait (cq_mutex_ held).
  bool can_send() const REQUIRES(cq_mutex_);
  // Send-queue entries a message takes: the write and, on iWARP, its SEND.
  int message_wrs() const { return msg_send_ ? 2 : 1; }
  // iWARP: the receive slot of message i, past the receive buffer.
  uint8_t* message_slot(uint32_t i) const { return ep_.rbuf + sizes_.rbuf_size + i * wire::kMsgSize; }
  // A control message's slot, when too big to go inline.
  uint8_t* ctrl_slot(uint32_t seq) const {
    return ep_.ctrl_slots + wire::kMaxCtrlMessage * (seq & (wire::kCtrlMessages - 1));
  }
  bool conn_can_send() const REQUIRES(cq_mutex_) { return can_send() || !(state_ & kWritable); }
  bool ctrl_available() const REQUIRES(cq_mutex_) { return ctrl_seqno_ != ctrl_max_seqno_; }
  bool conn_can_send_ctrl() const REQUIRES(cq_mutex_) {
    return ctrl_available() || !(state_ & kConnected);
  }
  bool have_data() const REQUIRES(cq_mutex_) { return rmsg_head_ != rmsg_tail_; }
  bool conn_have_data() const REQUIRES(cq_mutex_) { return have_data() || !(state_ & kReadable); }
  bool all_sends_done() const REQUIRES(cq_mutex_);
  bool nonblocking(int flags) const { return (fd_flags_ & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

  // Locks, in the order they may be taken: connect_mutex_ (the handshake:
  // advance_connect) and, apart, send_mutex_ (one sender: the pending
  // iomaps) before map_mutex_ (the mapping lists); recv_mutex_ (one
  // receiver: rbuf_offset_); any of those before cq_mutex_ (the CQ and every
  // counter completions and posts update) before cq_sleep_mutex_ (one
  // sleeper on the CQ's channel): completion_wait.h.
  //
  // state_ is read without a lock and changes in one atomic step each: by
  // the application's bind and listen, under connect_mutex_ during the
  // handshake (advance_connect; a new accepted socket before rraccept hands
  // it out), under cq_mutex_ once connected (a change made on what it read
  // holds cq_mutex_ across both).
  rdma_cm_id* id_ = nullptr;
  std::atomic<int> state_{kInit};
  int err_ = 0;  // why the connection failed (kConnectError, kError): SO_ERROR
  // The peer ended the connection while we could still write (its close, its
  // death): the first send after the peer stopped writing is taken, as TCP's
  // in CLOSE_WAIT, whether it finds us still connected or not (send).
  std::atomic<bool> peer_ended_{false};
  std::atomic<bool> reset_taken_{false};
  std::atomic<bool> peer_shut_wr_{false};  // the peer's shutdown (or close) arrived
  int retries_ = 0;
  bool swap_sgl_ = false;       // the peer's byte order differs
  bool msg_send_ = false;       // iWARP: no immediate data, each message a SEND (create_endpoint)
  bool in_service_ = false;     // registered with a CM service
  std::vector<uint8_t> route_;  // RDMA_ROUTE set before connect
  uint64_t so_opts_ = 0, tcp_opts_ = 0, ipv6_opts_ = 0;  // boolean options, bit = optname
  linger linger_{0, 0};                                   // SO_LINGER as set
  bool connect_reported_ = false;  // a connect returned 0, or accept gave it: connect is EISCONN
  int keepalive_count_ = 9, keepalive_interval_ = 75;     // TCP_KEEPCNT, TCP_KEEPINTVL as set (Linux's defaults)
  std::atomic<unsigned> keepalive_time_{0};
  bool keepalive_on_ = false;
  wire::Ctrl close_ctrl_ = wire::Ctrl::shutdown;  // what rclose tells the peer
  bool close_ctrl_pending_ = false;               // not sent yet (no slot free)
  uint64_t linger_until_us_ = 0;                  // a lingering close ends by then (now_us)

  // Sizes (a listener's, else config()'s); fixed by create_endpoint.
  Sizes sizes_;
  uint16_t target_iomap_size_;

  // Buffers, registered with the id's PD (endpoint.h), made at connect or
  // accept, or taken made ahead (endpoint_spares.h). The send ring grows
  // with the traffic (growing_buffer.h); the receive buffer is the window
  // the peer may fill without our reading (programs count on it as on
  // TCP's: a 64 KiB reply sent before the peer reads), registered whole at
  // once. Control messages too big to go inline have slots of their own,
  // made only then.
  Endpoint ep_;

  // Sequence numbers: messages sent / allowed, consumed / credited.
  uint32_t ctrl_seqno_ GUARDED_BY(cq_mutex_) = 0;
  uint32_t ctrl_max_seqno_ GUARDED_BY(cq_mutex_) = wire::kCtrlMessages;
  uint16_t sseq_no_ GUARDED_BY(cq_mutex_) = 0, sseq_comp_ GUARDED_BY(cq_mutex_) = 0;
  uint16_t rseq_no_ GUARDED_BY(cq_mutex_) = 0, rseq_comp_ GUARDED_BY(cq_mutex_) = 0;
  // What the peer may send us: DATA and IOMAP_SGL messages up to our last
  // grant (received / granted), and DATA bytes up to the receive-buffer
  // space granted and not written yet (take_message checks both).
  uint16_t rseq_recv_ GUARDED_BY(cq_mutex_) = 0, rseq_granted_ GUARDED_BY(cq_mutex_) = 0;
  uint32_t rbuf_granted_ GUARDED_BY(cq_mutex_) = 0;
  uint32_t rbuf_msg_index_ GUARDED_BY(cq_mutex_) = 0;  // iWARP: the next receive's slot

  wire::Sge remote_sgl_{};  // the peer's target SGL (fixed at connection)
  wire::Sge remote_iomap_{};
  uint32_t remote_sge_ GUARDED_BY(cq_mutex_) = 0;  // next entry of it to write
  uint32_t target_sge_ GUARDED_BY(cq_mutex_) = 0;  // next entry of ours to send data to

  int rbuf_bytes_avail_ GUARDED_BY(cq_mutex_) = 0, rbuf_free_offset_ GUARDED_BY(cq_mutex_) = 0;
  int rbuf_offset_ GUARDED_BY(recv_mutex_) = 0;
  int sbuf_bytes_avail_ GUARDED_BY(cq_mutex_) = 0;
  // Growth of the send ring: a send found it full since its last growth;
  // the bytes posted in all, and at the last growth (its previous
  // registration is retired once every byte in flight was posted after it).
  bool sbuf_starved_ GUARDED_BY(cq_mutex_) = false;
  uint64_t sbuf_posted_ GUARDED_BY(cq_mutex_) = 0, sbuf_grow_mark_ GUARDED_BY(cq_mutex_) = 0;
  // The connection service looks at a grown ring (shrink_idle_send_ring);
  // sbuf_posted_ at its last look.
  bool sbuf_idle_watched_ GUARDED_BY(cq_mutex_) = false;
  uint64_t sbuf_idle_mark_ GUARDED_BY(cq_mutex_) = 0;
  ibv_sge ssgl_[2] GUARDED_BY(cq_mutex_){};
  int sqe_avail_ GUARDED_BY(cq_mutex_) = 0;
  // The queues in use (endpoint.h): sends outstanding at most, receives
  // posted (the credits a grant gives); deepened with the traffic up to the
  // QP's depths (sizes_), the CQ with them.
  uint16_t sq_depth_ GUARDED_BY(cq_mutex_) = 0, rq_depth_ GUARDED_BY(cq_mutex_) = 0;
  Quiet quiet_ GUARDED_BY(cq_mutex_){};  // quiet sends since the last signalled one
  std::vector<Quiet> adopted_ GUARDED_BY(cq_mutex_);  // what each adopting send in flight holds
  size_t adopted_head_ GUARDED_BY(cq_mutex_) = 0, adopted_tail_ GUARDED_BY(cq_mutex_) = 0;

  std::vector<uint32_t> rmsg_;  // the lengths of received DATA messages: rq_size + 1 slots
  int rmsg_head_ GUARDED_BY(cq_mutex_) = 0, rmsg_tail_ GUARDED_BY(cq_mutex_) = 0;

  int unack_cqe_ GUARDED_BY(cq_sleep_mutex_) = 0;  // CQ events taken, not acknowledged yet
  std::atomic<bool> cq_failed_{false};  // the channel failed (sleep_on_cq): kError at the next reap

  // A listener's connections that raccept has not taken yet: accepting (the
  // connection service follows their handshake, for at most
  // kAcceptTimeoutMs) or connected, their fd in accept_queue_. At most
  // backlog_ (rlisten's backlog + 1, as TCP's accept queue); past it the listener takes no more requests (paused_: the
  // listener service stops watching it), so that they wait in the kernel, as
  // TCP's past a full accept queue: the kernel holds as many as rlisten's
  // backlog unanswered, drops the rest without a word, and the peer's CM sends
  // them again. raccept, or a handshake that failed, makes room and resumes.
  int accept_queue_[2] = {-1, -1};
  Mutex accept_mutex_;  // taken before the listener service's own lock, nothing else
  std::vector<StreamSocket*> unaccepted_ GUARDED_BY(accept_mutex_);
  size_t backlog_ GUARDED_BY(accept_mutex_) = 0;
  bool paused_ GUARDED_BY(accept_mutex_) = false;   // full: not watched by the listener service
  bool closing_ GUARDED_BY(accept_mutex_) = false;  // rclose has begun: never watched again
  // One of those: its listener, until raccept takes it (or the listener
  // closes and drops it). Read by the connection service while it is listed.
  StreamSocket* listener_ = nullptr;

  Mutex map_mutex_ ACQUIRED_AFTER(send_mutex_);
  std::vector<Mapping> mapped_ GUARDED_BY(map_mutex_);   // sent to the peer, or local only
  std::vector<Mapping> pending_ GUARDED_BY(map_mutex_);  // to send before the next data
  std::atomic<bool> iomaps_pending_{false};  // !pending_.empty(), for a look without the lock
  std::vector<bool> slot_used_ GUARDED_BY(map_mutex_);   // the peer's iomap table entries we fill

  Mutex send_mutex_, recv_mutex_, connect_mutex_;
  uint32_t chunk_limit_ GUARDED_BY(send_mutex_) = wire::kFirstTransfer;  // the next write's size
};

}  // namespace rdmacm::rsocket
