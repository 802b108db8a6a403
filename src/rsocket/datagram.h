// Datagram rsockets (SOCK_DGRAM) over UD QPs, as rdma-core 44's: the fd is a
// UDP socket's, which also carries the first message to each destination
// (wire format and exchange: protocol.h). One UD QP per local address the
// socket sends from, each with its own CQ; one destination entry (address
// handle and QPN) per peer address.
//
// Unlike rdma-core 44's, address handles carry a GRH on RoCE ports (RoCE has
// no LIDs: an AH without one cannot reach anything, not even ourselves).
//
// A datagram on the UDP socket that is not the protocol's (no DsUdpHeader
// tag: a kernel UDP sender, such as a program the preload left on kernel
// UDP) is the application's, as kernel UDP would deliver it, from its
// source: the service queues it (bounded as the receive buffer) and recv
// takes it. A destination with no RDMA path (loopback and wildcard
// addresses: RoCE has no loopback; multicast and broadcast; one reached
// from an address no RDMA device has) is sent to over
// the UDP socket as plain UDP, and so is a peer heard only in plain
// datagrams (datagram_plain.cpp).
//
// A peer is not trusted: the destinations are bounded and a working one is
// not rebound by a bare claim (datagram_dests.h); a new source's address is
// resolved on an event channel the UDP service watches, never waited for on
// its thread, at most kMaxResolving at a time (datagram_resolve.cpp).
//
// Locks, in the order they may be taken: recv_mutex_ (one receiver) before
// send_mutex_ (one sender; the destinations' AH, binding and resolution,
// conn_dest_) before map_mutex_ (the destination table and the QP list)
// before cq_mutex_ (polling the CQs and the state they update: send slots,
// received messages) before cq_sleep_mutex_ (one sleeper on the epoll fd:
// completion_wait.h).
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include "common/mutex.h"
#include <vector>

#include "rsocket/completion_wait.h"
#include "rsocket/datagram_dests.h"
#include "rsocket/datagram_header.h"
#include "rsocket/message.h"
#include "rsocket/protocol.h"
#include "rsocket/sizes.h"
#include "rsocket/socket.h"

namespace rdmacm::rsocket {

class DatagramSocket;

// One UD QP of a socket's (per local address it sends from).
struct DatagramQp {
  rdma_cm_id* id = nullptr;
  wire::DsHeader hdr{};  // what our messages from this QP start with
  DatagramDest* self = nullptr;  // this QP itself: the service forwards first messages here
  ibv_mr* smr = nullptr;
  ibv_mr* rmr = nullptr;
  uint8_t* rbuf = nullptr;  // rq_size slots, then one GRH per slot
  uint16_t max_inline = 0;  // what the device granted
  uint32_t max_msg = wire::kDsSlotSize;  // one UD message: a slot, or the port's MTU if less
  bool roce = false;        // its port's link layer is Ethernet

  // The most payload one datagram from this QP carries: a UD message bigger
  // than the port's MTU is dropped by the device without a word (IB spec
  // C10-93.1.1; rxe completes it successfully), so past this a send fails.
  size_t max_payload() const { return max_msg - hdr.length; }
  std::atomic<bool> cq_armed{false};  // set by arm (cq_mutex_), cleared by sleep_on_cq
};

// One fd the UDP service watches for a socket (datagram_service.cpp): its
// UDP socket, or the event channel of its address resolutions.
struct DatagramWatch {
  DatagramSocket* socket = nullptr;
  void (DatagramSocket::*ready)() = nullptr;
  int fd_ = -1;
  int fd() const { return fd_; }
};

class DatagramSocket final : public Socket, private CompletionWait<DatagramSocket> {
 public:
  // A new socket (rsocket()); -errno in *err on failure.
  static DatagramSocket* create(int domain, int* err);
  ~DatagramSocket() override;

  int bind(const sockaddr* addr, socklen_t len) override;
  int connect(const sockaddr* addr, socklen_t len) override;
  // The buffers as one message.
  ssize_t sendmsg(const msghdr& msg, int flags) override {
    return send_as_one(msg, [&](const void* buf, size_t len) {
      return send_to(buf, len, flags, static_cast<const sockaddr*>(msg.msg_name), msg.msg_namelen);
    });
  }
  // msg_flags: MSG_TRUNC when the datagram did not fit, as UDP's.
  ssize_t recvmsg(msghdr& msg, int flags) override {
    auto* src = static_cast<sockaddr*>(msg.msg_name);
    socklen_t* src_len = src || msg.msg_namelen ? &msg.msg_namelen : nullptr;
    msg.msg_flags = 0;
    return recv_as_one(msg, [&](void* buf, size_t len) {
      size_t whole = 0;
      ssize_t n = recv_from(buf, len, flags, src, src_len, &whole);
      if (n >= 0 && whole > len) msg.msg_flags |= MSG_TRUNC;
      return n;
    });
  }
  int shutdown(int how) override;
  void release(std::unique_ptr<File> self) override;
  int peer_name(sockaddr* addr, socklen_t* len) override;
  int sock_name(sockaddr* addr, socklen_t* len) override;
  int set_option(int level, int name, const void* value, socklen_t len) override;
  int get_option(int level, int name, void* value, socklen_t* len) override;
  int set_flags(int flags) override;
  short poll_state(short events) override;
  int wait_fd() override;
  void consume_wakeup() override;

  // For the UDP service (datagram_service.cpp): one datagram is waiting on
  // the UDP socket (the fd).
  void process_udp();
  // For the UDP service (datagram_resolve.cpp): events of address
  // resolutions are waiting on their channel.
  void process_resolutions();

  using Addr = SockAddr;
  // Address resolutions in flight at once, per socket: a new source past
  // them is not resolved (its datagrams are still delivered; its replies go
  // over UDP until a later claim or a UD message from it binds it).
  static constexpr int kMaxResolving = 8;

  // A test hook, not the public API: the socket's destination table.
  struct Stats {
    size_t peers, max_peers, evictions;
    int resolving;
  };
  Stats stats();

 private:
  using Qp = DatagramQp;
  using Dest = DatagramDest;
  struct Received {
    Qp* qp;
    uint32_t offset;  // of the slot in qp->rbuf
    uint32_t length;  // DsHeader and payload
    ibv_wc wc;        // with the slot's GRH: an AH back to the sender
  };
  // A receive's wr_id: this flag and the slot's offset.
  static constexpr uint64_t kRecvFlag = 1ull << 63;
  // Each slot's GRH goes past the data slots (rdma-core 44 shares one among
  // all receives; ours is kept until the message is taken, for learn_ah).
  uint8_t* grh_of(const Qp* qp, uint32_t offset) const {
    return qp->rbuf + sizes_.rbuf_size + offset / wire::kDsSlotSize * sizeof(ibv_grh);
  }

  DatagramSocket() = default;

  // One buffer: to the connected peer, to dst (none: the connected peer),
  // from anyone (the source in src if src_len is given; the datagram's whole
  // length in *whole if given; with MSG_TRUNC that length is returned, as
  // UDP's, however much of it fitted).
  ssize_t send(const void* buf, size_t len, int flags);
  ssize_t send_to(const void* buf, size_t len, int flags, const sockaddr* dst, socklen_t dst_len);
  ssize_t recv_from(void* buf, size_t len, int flags, sockaddr* src, socklen_t* src_len,
                    size_t* whole = nullptr);

  // datagram.cpp: endpoints, destinations, sending.
  int init_endpoint();  // first bind/connect/sendto: sizes, send slots, the UDP service
  // The destination for addr, made if new (evicting: datagram_dests.h);
  // -ENOBUFS when the table is full of destinations in use.
  int get_dest(const sockaddr* addr, socklen_t len, Dest** out) REQUIRES(send_mutex_)
      EXCLUDES(map_mutex_);
  // Keeps dests_unsettled_ (no AH, or a candidate pending) as f changes d.
  template <typename F>
  void settle(Dest* d, F&& f) {
    bool before = d->over_udp();
    f();
    if (before != d->over_udp()) dests_unsettled_ += before ? -1 : 1;
  }
  int bound_name(Addr* name);
  int source_for(const sockaddr* dst, socklen_t dst_len, Addr* src);
  ssize_t send_udp(Dest* dest, const void* buf, size_t len, int flags, wire::Op op);
  ssize_t send_ud(Dest* dest, const wire::DsHeader& hdr, const void* buf, size_t len, int flags)
      REQUIRES(send_mutex_);

  // datagram_qp.cpp: QPs and address handles.
  int get_qp(const Addr& src, Qp** out) REQUIRES(map_mutex_);
  int create_qp(const Addr& src, Qp** out) REQUIRES(map_mutex_);
  void free_qp(Qp* qp);
  int post_recv(Qp* qp, uint32_t offset);
  // An AH towards the address a resolved id found (resolved: its route).
  static ibv_ah* route_ah(rdma_cm_id* local, rdma_cm_id* resolved, const Addr& dst);
  // A UD message naming from as its source (recv_from): the binding rule's
  // proof (datagram_dests.h), and an AH learnt from it for a destination
  // without one.
  void heard_from(const Addr& from, Qp* qp, const ibv_wc& wc, const ibv_grh& grh)
      EXCLUDES(send_mutex_);
  void set_ah(Dest* dest, ibv_ah* ah, uint32_t qpn) REQUIRES(send_mutex_);

  // datagram_plain.cpp: datagrams that are not the protocol's. A plain
  // datagram the service read (queued unless past the receive buffer's
  // room; the wake-up fd made readable); the queue's first, taken by
  // recv_from; sends as plain UDP to dst; whether dst has no RDMA path; the
  // plain peers' memory (a peer heard in plain datagrams and never in the
  // protocol's is answered in plain ones).
  void queue_plain(const Addr& from, socklen_t from_len, const uint8_t* buf, size_t len)
      EXCLUDES(cq_mutex_);
  ssize_t take_plain(void* buf, size_t len, int flags, sockaddr* src, socklen_t* src_len,
                     size_t* whole) REQUIRES(cq_mutex_);
  ssize_t send_plain(const void* buf, size_t len, int flags, const sockaddr* dst,
                     socklen_t dst_len);
  bool plain_path(const Addr& dst) REQUIRES(send_mutex_) EXCLUDES(map_mutex_);
  int get_rdma_qp(const Addr& src, Qp** out) REQUIRES(map_mutex_);
  bool answer_plain(const Addr& a) REQUIRES(send_mutex_) EXCLUDES(map_mutex_, cq_mutex_);
  void forget_plain_peer(const Addr& a) EXCLUDES(cq_mutex_);

  // datagram_service.cpp: a well-formed datagram from a peer: answered,
  // claimed, its payload (data) forwarded to our own QP.
  void forward_udp(const Addr& from, socklen_t from_len, uint32_t qpn, bool data,
                   const uint8_t* payload, size_t len) EXCLUDES(send_mutex_);

  // datagram_resolve.cpp: a claim (a DsUdpHeader from dest's address naming
  // qpn) under the binding rule, and the resolutions it starts.
  void claim(Dest* dest, uint32_t qpn) REQUIRES(send_mutex_);
  void start_resolve(Dest* dest, uint32_t qpn) REQUIRES(send_mutex_);
  void end_resolve(Dest* dest, ibv_ah* ah) REQUIRES(send_mutex_);

  // datagram_io.cpp: completions (CompletionWait's reap, arm, sleep_on_cq).
  friend class CompletionWait<DatagramSocket>;
  int reap() REQUIRES(cq_mutex_);
  void arm() REQUIRES(cq_mutex_);
  int sleep_on_cq(int ms) REQUIRES(cq_sleep_mutex_);
  bool can_send() const REQUIRES(cq_mutex_) { return sqe_avail_ > 0; }
  bool all_sends_done() const REQUIRES(cq_mutex_) { return sqe_avail_ == sizes_.sq_size; }
  bool have_data() const REQUIRES(cq_mutex_) {
    return rmsg_head_ != rmsg_tail_ || !plain_.empty();
  }
  // A message's source is the connected peer (or the socket is not connected).
  bool from_peer(const wire::DsHeader& hdr) const REQUIRES(cq_mutex_);
  bool nonblocking(int flags) const { return (fd_flags_ & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

  int epfd_ = -1;
  int wake_fd_ = -1;  // an eventfd in epfd_: readable while plain_ is not empty
  Mutex init_mutex_;                   // init_endpoint: first bind, connect or sendto
  std::atomic<bool> endpoint_{false};  // init_endpoint done
  bool in_service_ GUARDED_BY(init_mutex_) = false;  // registered with the UDP service
  std::atomic<bool> readable_{false}, writable_{false};
  DatagramWatch udp_watch_, cm_watch_;  // what the UDP service watches (in_service_)
  rdma_event_channel* resolver_ = nullptr;  // the resolutions' (made by init_endpoint)

  // The sizes: under init_mutex_ until init_endpoint fixes them (endpoint_),
  // read freely after (never written again).
  Sizes sizes_ = Sizes::defaults();

  uint8_t* sbuf_ = nullptr;  // sq_size send slots of wire::kDsSlotSize
  std::vector<uint32_t> free_slots_ GUARDED_BY(cq_mutex_);
  int sqe_avail_ GUARDED_BY(cq_mutex_) = 0;
  int rqe_avail_ GUARDED_BY(cq_mutex_) = 0;
  uint64_t posts_ GUARDED_BY(cq_mutex_) = 0;  // UD sends posted
  uint64_t drained_ GUARDED_BY(cq_mutex_) = 0;  // posts_ when the send queue was last empty

  // Added under map_mutex_ and cq_mutex_ both (create_qp), so either lets a
  // thread read it; removed only when the socket goes.
  std::vector<std::unique_ptr<Qp>> qps_;
  size_t next_qp_ GUARDED_BY(cq_mutex_) = 0;  // where polling resumes, for fairness
  DestTable dests_ GUARDED_BY(map_mutex_);
  std::atomic<int> dests_unsettled_{0};  // over_udp(): a received message may settle them
  int resolving_ GUARDED_BY(send_mutex_) = 0;  // resolutions in flight
  Dest* conn_dest_ GUARDED_BY(send_mutex_) = nullptr;  // connect's
  Dest* last_dest_ GUARDED_BY(send_mutex_) = nullptr;  // sendto's last: a cache, never evicted
  bool conn_plain_ GUARDED_BY(send_mutex_) = false;  // connected to a destination without RDMA

  // Plain datagrams (datagram_plain.cpp), and the peers heard only in them.
  struct Plain {
    Addr from;
    socklen_t from_len;
    std::vector<uint8_t> bytes;
  };
  static constexpr size_t kMaxPlainPeers = 64;
  std::deque<Plain> plain_ GUARDED_BY(cq_mutex_);
  size_t plain_bytes_ GUARDED_BY(cq_mutex_) = 0;
  std::deque<Addr> plain_memory_ GUARDED_BY(cq_mutex_);  // most recent last
  // Sources no RDMA device has (get_rdma_qp), and whether loopback has one
  // per family (0 not known yet, 1 yes, -1 no).
  static constexpr size_t kMaxNoRdmaSources = 8;
  std::vector<Addr> no_rdma_sources_ GUARDED_BY(map_mutex_);
  int8_t loopback_rdma_[2] GUARDED_BY(send_mutex_) = {0, 0};
  std::atomic<size_t> plain_peers_{0};  // plain_memory_'s size, read without the lock

  bool connected_ GUARDED_BY(cq_mutex_) = false;  // connect's address, for from_peer
  Addr conn_addr_ GUARDED_BY(cq_mutex_){};

  std::vector<Received> rmsg_;  // rq_size + 1 slots: head to tail are recv_from's
  int rmsg_head_ GUARDED_BY(cq_mutex_) = 0, rmsg_tail_ GUARDED_BY(cq_mutex_) = 0;

  Mutex recv_mutex_;
  Mutex send_mutex_ ACQUIRED_AFTER(recv_mutex_);
  Mutex map_mutex_ ACQUIRED_AFTER(send_mutex_);
  // A leaf: ::connect on fd_ and the UDP service's ::recvfrom from it, one at
  // a time, so that a datagram is read either before the peer changes or
  // after (and ThreadSanitizer, which models an fd as memory, sees the order).
  Mutex fd_mutex_ ACQUIRED_AFTER(map_mutex_);
};

// The UDP service (datagram_service.cpp): a thread that reads the UDP
// sockets of datagram rsockets. Once unwatch returns, the thread no longer
// touches the socket.
int watch_udp(DatagramWatch* w);
void unwatch_udp(DatagramWatch* w);

}  // namespace rdmacm::rsocket
