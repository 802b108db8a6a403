// Stream rsockets: creation, bind, listen, accept and connect (the
// handshake's steps are stream_connect.cpp's), shutdown and close, names and
// flags. The data path is stream_io.cpp's, the QP's traffic stream_queue.cpp's.
#include "rsocket/stream.h"

#include <fcntl.h>
#include <infiniband/ib.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "core/cm.h"
#include "rsocket/caller_memory.h"
#include "rsocket/clock.h"
#include "rsocket/config.h"
#include "rsocket/kernel_fds.h"
#include "rsocket/queue_pair.h"
#include "rsocket/state_change.h"
#include "rsocket/stream_service.h"
#include "rsocket/table.h"

namespace rdmacm::rsocket {
namespace {

constexpr socklen_t kSin6LenRfc2133 = 24;  // the kernel's SIN6_LEN_RFC2133

// An address's size by its family (AF_INET6: the RFC 2133 sockaddr_in6 the
// kernel still takes, without the scope id, when binding).
socklen_t addr_size(const sockaddr* a) {
  switch (a->sa_family) {
    case AF_INET:
      return sizeof(sockaddr_in);
    case AF_IB:
      return sizeof(sockaddr_ib);
    default:
      return sizeof(sockaddr_in6);
  }
}

// bind(2)'s and connect(2)'s checks of an address for an AF_INET or
// AF_INET6 socket, in the kernel's order: long enough for its family, then
// of the socket's family (AF_UNSPEC with INADDR_ANY binds an AF_INET one, as
// the kernel allows for old programs).
int check_inet_addr(const sockaddr* a, socklen_t len, sa_family_t domain, bool binding) {
  socklen_t least = domain == AF_INET6 ? kSin6LenRfc2133
                    : domain == AF_INET ? static_cast<socklen_t>(sizeof(sockaddr_in))
                                        : addr_size(a);
  if (len < least) return -EINVAL;
  if ((domain != AF_INET && domain != AF_INET6) || a->sa_family == domain) return 0;
  const auto* in = reinterpret_cast<const sockaddr_in*>(a);
  if (binding && domain == AF_INET && a->sa_family == AF_UNSPEC &&
      in->sin_addr.s_addr == htonl(INADDR_ANY))
    return 0;
  return -EAFNOSUPPORT;
}

int copy_addr(sockaddr* dst, const sockaddr* src, socklen_t* len) {
  return give_addr(src, addr_size(src), dst, len);
}

}  // namespace

StreamSocket::StreamSocket(const StreamSocket* listener)
    : sizes_(listener ? listener->sizes_ : Sizes::defaults()),
      target_iomap_size_(listener ? listener->target_iomap_size_ : config().iomap_size) {}

StreamSocket* StreamSocket::create(int domain, int* err) {
  auto* s = new (std::nothrow) StreamSocket(nullptr);
  if (!s) {
    *err = -ENOMEM;
    return nullptr;
  }
  if ((*err = core::create_id(nullptr, &s->id_, s, RDMA_PS_TCP))) {
    delete s;
    return nullptr;
  }
  s->id_->route.addr.src_addr.sa_family = static_cast<sa_family_t>(domain);
  s->fd_ = s->id_->channel->fd;
  if (!insert_file(s->fd_, s)) {
    *err = -ENOMEM;
    delete s;
    return nullptr;
  }
  return s;
}

StreamSocket::~StreamSocket() {
  if (fd_ >= 0 && find_socket(fd_) == this) remove_file(fd_);
  release_mappings();
  ep_.deregister();
  if (id_) {
    destroy_queue_pair(id_, static_cast<unsigned>(unack_cqe_));
    core::destroy_id(id_);
  }
  // ep_'s memory (and a queue pair it still holds) goes with it.
  for (int fd : accept_queue_)
    if (fd >= 0) ::close(fd);
}

// As the kernel's bind: an address shorter than its family's is EINVAL
// (rdma-core 44 reads past it), one it cannot read EFAULT.
int StreamSocket::bind(const sockaddr* addr, socklen_t len) {
  sockaddr_storage a{};
  if (static_cast<int>(len) <= 0 || len > sizeof(a)) return -EINVAL;
  if (int err = copy_from_caller(&a, addr, len)) return err;
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  sa_family_t domain = id_->route.addr.src_addr.sa_family;
  if (int err = check_inet_addr(sa, len, domain, true)) return err;
  if (sa->sa_family == AF_UNSPEC) sa->sa_family = AF_INET;  // INADDR_ANY (checked above)
  if (int err = core::bind_addr(id_, sa)) return err;
  state_ = kBound;
  return 0;
}

namespace {
// Requests past a small backlog that the kernel holds unanswered (listen).
constexpr int kHeldRequests = 128;  // as TCP's tcp_max_syn_backlog on a small host

// The connections a listener holds for raccept, as the kernel's accept
// queue: one more than the backlog (0 holds one), which listen(2) takes as
// SOMAXCONN past it (or negative).
size_t backlog_limit(int backlog) {
  return (backlog < 0 || backlog > SOMAXCONN ? SOMAXCONN : static_cast<size_t>(backlog)) + 1;
}
}  // namespace

int StreamSocket::listen(int backlog) {
  if (state_ == kListening) {
    LockGuard lock(accept_mutex_);
    backlog_ = backlog_limit(backlog);
    resume_if_room();
    return 0;
  }
  // The kernel holds requests past the backlog unanswered (accept_requests):
  // at least kHeldRequests of them, so that a burst of clients waits there
  // for raccept rather than for its CM's next try, seconds later.
  if (int err = core::listen(id_, backlog > 0 ? std::max(backlog, kHeldRequests) : backlog))
    return err;
  if (accept_queue_[0] >= 0) {  // listening again after shutdown (stop_listening)
    ::close(accept_queue_[0]);
    accept_queue_[0] = -1;
    LockGuard lock(accept_mutex_);
    closing_ = false;
  }
  if (pipe2(accept_queue_, O_CLOEXEC)) return -errno;
  if ((fd_flags_ & O_NONBLOCK) && set_fd_nonblocking(accept_queue_[0], true)) return -errno;
  if (int err = set_fd_nonblocking(id_->channel->fd, true)) return err;
  {
    LockGuard lock(accept_mutex_);
    backlog_ = backlog_limit(backlog);
  }
  if (int err = watch(Watch::listeners, this)) return err;
  in_service_ = true;
  state_ = kListening;
  return 0;
}

void StreamSocket::resume_if_room() {
  if (!paused_ || closing_ || unaccepted_.size() >= backlog_) return;
  // Whatever waits in the kernel makes the channel readable at once.
  if (!watch(Watch::listeners, this)) paused_ = false;
}

// The listener service's: takes each connection request while the backlog
// has room, answers it and leaves the handshake's end to the connection
// service (finish_accept), so that no peer holds this thread (rdma-core 44
// waits here, for every listener of the process, until the kernel gives up on
// a peer that never completes the handshake). Once the backlog is full it
// stops (paused_): the requests wait in the kernel, unanswered, costing no QP,
// memory or thread, and are never refused (TCP's accept queue; rdma-core 44's
// leaves them in the kernel too).
void StreamSocket::accept_requests() {
  for (;;) {
    {
      LockGuard lock(accept_mutex_);
      if (unaccepted_.size() >= backlog_) {
        if (!paused_) core::trace_rsocket(fd_, "the backlog is full: requests wait in the kernel", EAGAIN);
        paused_ = true;
        unwatch(Watch::listeners, this);  // on this thread: does not wait
        return;
      }
    }
    rdma_cm_id* cm_id = nullptr;
    if (core::get_request(id_, &cm_id)) return;  // none left (EAGAIN)
    auto* s = new (std::nothrow) StreamSocket(this);
    const rdma_conn_param& req = cm_id->event->param.conn;
    size_t offset = conn_data_offset(id_);
    bool ok = s != nullptr && req.private_data &&
              req.private_data_len >= offset + sizeof(wire::ConnData);
    wire::ConnData creq{};
    if (ok) {
      std::memcpy(&creq, static_cast<const uint8_t*>(req.private_data) + offset, sizeof(creq));
      ok = creq.version == wire::kVersion;
    }
    if (ok) {
      s->id_ = cm_id;
      s->fd_ = cm_id->channel->fd;
      ok = insert_file(s->fd_, s) && !s->create_endpoint() &&
           !set_fd_nonblocking(s->fd_, true);  // the accept must not wait for the peer
    }
    if (!ok) {
      core::reject(cm_id, nullptr, 0, false);
      bool owned = s && s->id_;
      delete s;  // with cm_id, once it owns it
      if (!owned) core::destroy_id(cm_id);
      continue;
    }
    s->save_conn_data(creq);
    rdma_conn_param param = req;
    wire::ConnData cresp;
    s->format_conn_data(&cresp);
    param.private_data = &cresp;
    param.private_data_len = sizeof(cresp);
    int err = core::accept(cm_id, &param);
    if (err && err != -EAGAIN) {
      core::reject(cm_id, nullptr, 0, false);
      delete s;
      continue;
    }
    s->state_ = err ? kAccepting : kConnectedRdWr;
    s->listener_ = this;
    {
      LockGuard lock(accept_mutex_);
      unaccepted_.push_back(s);
    }
    // Marked watched before it is: once the connection service has it, it
    // may finish the handshake and queue it, raccept hand it out and rclose
    // end it (which reads the mark), all before watch() returns here; s is
    // not touched after a watch that took it (ASan caught a write there to
    // a socket already closed and freed).
    s->in_service_ = true;
    if (err) {
      // Accepting: the connection service sees the handshake end. The
      // deadline first: once watched, the service may end it (and cancel
      // the deadline) at once.
      if (!watch(Watch::accept_deadline, s) && !watch(Watch::connections, s)) continue;
      s->in_service_ = false;
      s->state_ = kConnectError;  // nothing would end its handshake: drop it now
    } else if (watch(Watch::connections, s)) {  // for its disconnect
      s->in_service_ = false;
    }
    finish_accept(s);
  }
}

// On the connection service's thread (or the listener service's, for a
// connection accepted at once): the unwatch calls do not wait.
void StreamSocket::finish_accept(StreamSocket* s) {
  unwatch(Watch::accept_deadline, s);
  bool listed, queued = false;
  {
    LockGuard lock(accept_mutex_);
    listed = std::erase(unaccepted_, s) > 0;
    if (listed && (s->state_ & kConnected)) {
      int fd = s->fd_;
      queued = ::write(accept_queue_[1], &fd, sizeof(fd)) == sizeof(fd);
      if (queued) unaccepted_.push_back(s);
    }
  }
  if (!listed || queued) return;  // not ours any more (the listener closes), or raccept's
  {
    LockGuard lock(accept_mutex_);
    resume_if_room();
  }
  core::trace_rsocket(s->fd_, "an accepted connection's handshake failed or took too long",
                        s->err_ ? s->err_ : ETIMEDOUT);
  unwatch(Watch::connections, s);
  delete s;
}

void StreamSocket::accept_timed_out() { listener_->finish_accept(this); }

void StreamSocket::drop_unaccepted() {
  std::vector<StreamSocket*> left;
  {
    LockGuard lock(accept_mutex_);
    left.swap(unaccepted_);
  }
  for (StreamSocket* s : left) {
    // Once these return, neither the handshake's end nor its deadline runs
    // for s (one running now finds s no longer listed and leaves it).
    unwatch(Watch::accept_deadline, s);
    unwatch(Watch::connections, s);
    if (s->state_ & kConnected) {
      // Made but never accepted: the peer learns at once that it ended (the
      // kernel resets such a connection; the rsocket wire has no reset, so a
      // disconnect, read as end-of-file), on the lingerer's thread, not this
      // one. Destroyed without a word, an rdma-core peer never learned (it
      // does not read the connection manager's disconnect) and waited for ever.
      s->linger_until_us_ = 0;
      linger_close(std::unique_ptr<StreamSocket>(s));  // no lingerer: gone at once
      continue;
    }
    delete s;
  }
}

int StreamSocket::accept(sockaddr* addr, socklen_t* len) {
  if (state_ != kListening) return -EINVAL;  // as accept(2) (rdma-core 44: EBADF)
  uint64_t us = timeouts_.receive_us();
  if (!(fd_flags_ & O_NONBLOCK) && us != Timeouts::kNone) {
    // SO_RCVTIMEO bounds a blocking accept, as accept(2)'s: EAGAIN at the
    // bound, EINTR for a signal (never restarted, as the kernel's).
    pollfd p{accept_queue_[0], POLLIN, 0};
    int n = ::poll(&p, 1, Timeouts::poll_ms(Timeouts::deadline(us)));
    if (n < 0) return -errno;
    if (n == 0) return state_ != kListening ? -EINVAL : -EAGAIN;
  }
  int fd = -1;
  ssize_t n = ::read(accept_queue_[0], &fd, sizeof(fd));
  // The listener was shut down meanwhile (stop_listening: end of file).
  if (state_ != kListening) return -EINVAL;
  if (n < 0) return -errno;
  if (n != sizeof(fd)) return -ECONNABORTED;
  StreamSocket* s = nullptr;
  {
    LockGuard lock(accept_mutex_);
    auto it = std::find_if(unaccepted_.begin(), unaccepted_.end(),
                           [fd](const StreamSocket* u) { return u->fd_ == fd; });
    if (it == unaccepted_.end()) return state_ != kListening ? -EINVAL : -ECONNABORTED;
    s = *it;
    unaccepted_.erase(it);
    s->listener_ = nullptr;
    s->connect_reported_ = true;
    resume_if_room();
  }
  if (addr && len) s->peer_name(addr, len);
  return fd;
}

int StreamSocket::connect(const sockaddr* addr, socklen_t len) {
  if (!addr) return -EFAULT;
  if (len < sizeof(sa_family_t) || len > sizeof(id_->route.addr.dst_storage)) return -EINVAL;
  // As connect(2): once a connection was reported (connect returned 0, or
  // accept gave the socket) EISCONN; a non-blocking connect's end is
  // reported once, by the connect that finds it done.
  if (connect_reported_) return -EISCONN;
  if (state_ == kInit || state_ == kBound) {
    if (int err = check_inet_addr(addr, len, id_->route.addr.src_addr.sa_family, false)) return err;
  }
  // Another thread's connect under way: EALREADY, as connect(2).
  if (!connect_mutex_.try_lock()) return -EALREADY;
  if ((state_ & kOpening) && !(fd_flags_ & O_NONBLOCK)) {
    // The handshake goes on behind (the connection service follows it): a
    // blocking connect waits for its end first, as connect(2).
    connect_mutex_.unlock();
    if (int err = wait_connect_end(timeouts_.send_us(), -EALREADY)) return err;
    if (!connect_mutex_.try_lock()) return -EALREADY;
  }
  if (state_ == kInit || state_ == kBound) std::memcpy(&id_->route.addr.dst_addr, addr, len);
  int err = connect_within_timeout();
  bool opening = (state_ & kOpening) != 0;
  // Followed by the connection service from here (its handshake's end, or
  // its disconnect): it must not block.
  if ((opening || (state_ & kConnected)) && !(fd_flags_ & O_NONBLOCK))
    set_fd_nonblocking(id_->channel->fd, true);
  connect_mutex_.unlock();
  // A connect that ended here (a blocking one, above all): sleepers in rpoll
  // or repoll on this socket from other threads look again (its events were
  // this thread's to read).
  if (!opening) announce_state_change(fd());
  // The connection service follows a handshake still under way (a
  // non-blocking one's, or one past SO_SNDTIMEO) and, as for an accepted
  // connection, the disconnect of every connection: a peer that dies wakes a
  // reader asleep on the CQ (rdma-core 44 leaves it asleep).
  bool connected = !err && (state_ & kConnected);
  if (connected) connect_reported_ = true;
  if ((opening || connected) && !in_service_) {
    if (!watch(Watch::connections, this)) in_service_ = true;
  }
  return err;
}

namespace {
// How long rshutdown waits for a control slot and for our sends to complete:
// a peer that stopped reading (SIGSTOP) must not hold the caller for ever
// (rdma-core 44's waits without a bound).
constexpr int kShutdownWaitMs = 5000;
}  // namespace

int StreamSocket::shutdown(int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return -EINVAL;
  // As TCP: a socket that never connected (or failed to) is ENOTCONN;
  // rdma-core 44 answers 0.
  int state = state_;
  if (state == kInit || state == kBound || state == kConnectError) return -ENOTCONN;
  // As TCP's: a listener stops listening when its reading is shut.
  if (state == kListening) return how == SHUT_WR ? 0 : stop_listening();
  int err = 0;
  bool wake_reader = false;
  if (state_ & kConnected) {
    wire::Ctrl ctrl = wire::Ctrl::disconnect;
    bool send = true;
    {
      LockGuard lock(cq_mutex_);  // the change made on what it read
      if (how == SHUT_RDWR) {
        // Until the peer has ended its side, only say we end ours (as TCP's
        // FIN): a DISCONNECT makes an rdma-core 44 peer report POLLHUP with
        // our last data unread (rstream -T a, whose server shuts down
        // first). The DISCONNECT follows at rclose, once the peer has ended.
        if (state_ & kReadable) ctrl = wire::Ctrl::shutdown;
        state_ &= ~(kReadable | kWritable);
      } else if (how == SHUT_WR) {
        state_ &= ~kWritable;
        if (state_ & kReadable) ctrl = wire::Ctrl::shutdown;
      } else {
        state_ &= ~kReadable;
        send = !(state_ & kWritable);
        wake_reader = !send;
      }
    }
    if (send) err = send_ctrl(ctrl, kShutdownWaitMs);
    // A thread asleep in a receive must see that reading is over (TCP wakes
    // it: 0). It sleeps on the CQ: a keep-alive probe (a write of no bytes,
    // which the peer's rsocket never sees) completes there and wakes it.
    // When no control slot is free, the completion of one in flight will.
    if (wake_reader) send_keepalive();
    announce_state_change(fd());  // rpoll and repoll sleepers look again
  }
  if (!err && (state_ & kConnected) && !wait_sends_done(kShutdownWaitMs)) err = -ETIMEDOUT;
  if (state_ & kDisconnected) {
    // Flush the receives so that a thread asleep in rpoll wakes.
    ibv_req_notify_cq(id_->recv_cq, 0);
    core::flush_qp(id_);
  }
  return err;
}

// shutdown(SHUT_RD or SHUT_RDWR) of a listener, as TCP's (inet_shutdown's
// disconnect of a listening socket): it takes no more requests, drops the
// connections raccept has not taken, and every raccept, one asleep too, is
// EINVAL from then on: the accept queue's write end is closed, so its
// readers see end of file (and rpoll, POLLHUP). The socket is bound again:
// rlisten may listen anew. The kernel's id still listens: requests that
// come meanwhile wait there unanswered until their CM gives up (TCP resets
// them).
int StreamSocket::stop_listening() {
  {
    LockGuard lock(accept_mutex_);
    closing_ = true;  // no raccept or handshake's end watches it again
  }
  if (in_service_) {
    unwatch(Watch::listeners, this);
    in_service_ = false;
  }
  state_ = kBound;
  drop_unaccepted();  // then no handshake's end writes to the queue
  {
    LockGuard lock(accept_mutex_);
    ::close(accept_queue_[1]);
    accept_queue_[1] = -1;
  }
  announce_state_change(fd());  // rpoll and repoll sleepers look again
  return 0;
}

// Closes as TCP does: our end first, at once (the peer reads what is queued,
// then end-of-file), the rest once the peer has closed its end too, or after
// at most kLingerMs, in the background (stream_service.cpp), so rclose itself
// never waits on the peer. rdma-core 44 disconnects at once, and a peer in rpoll
// then sees POLLHUP before it has read the last data (rstream -T a fails on
// it); its rclose waits without a bound for its sends to complete.
void StreamSocket::release(std::unique_ptr<File> self) {
  if (state_ == kListening) {
    LockGuard lock(accept_mutex_);
    closing_ = true;  // no raccept or handshake's end watches it again
  }
  if (in_service_) {
    unwatch(state_ == kListening ? Watch::listeners : Watch::connections, this);
    in_service_ = false;
  }
  if (state_ == kListening) drop_unaccepted();
  if (keepalive_on_) {
    unwatch(Watch::keepalive, this);
    keepalive_on_ = false;
  }
  bool ring_watched;
  {
    LockGuard lock(cq_mutex_);
    ring_watched = std::exchange(sbuf_idle_watched_, false);
  }
  if (ring_watched) unwatch(Watch::send_ring_idle, this);  // waits for a look under way
  if (!(state_ & kConnected)) return;
  bool tell = false;
  {
    LockGuard lock(cq_mutex_);
    if (state_ & kWritable) {
      state_ &= ~kWritable;
      close_ctrl_ = state_ & kReadable ? wire::Ctrl::shutdown : wire::Ctrl::disconnect;
      tell = true;
    }
  }
  if (tell) close_ctrl_pending_ = send_ctrl(close_ctrl_, 0) == -ETIMEDOUT;
  if (!(state_ & kConnected)) return;
  linger_until_us_ = now_us() + kLingerMs * 1000ull;
  // If no lingerer takes it (no thread), it goes at once.
  linger_close(std::unique_ptr<StreamSocket>(static_cast<StreamSocket*>(self.release())));
}

bool StreamSocket::linger_done() {
  if (close_ctrl_pending_)  // no control slot was free at rclose: try again
    close_ctrl_pending_ = send_ctrl(close_ctrl_, 0) == -ETIMEDOUT;
  if (wait_ms(&StreamSocket::peer_closed, 0)) return true;
  {
    // Bytes that nobody will read (the peer wrote after we closed, or we
    // closed with bytes unread): as TCP answers them with a reset, end now,
    // and the peer's next send fails instead of going nowhere for kLingerMs.
    LockGuard lock(cq_mutex_);
    if (have_data()) return true;
  }
  return now_us() >= linger_until_us_;
}

// The peer did not close its end in time (or did): tell it we are gone,
// give that a moment to leave, and flush the QP.
void StreamSocket::finish_close() {
  if (state_ & kConnected) {
    {
      LockGuard lock(cq_mutex_);
      state_ &= ~(kReadable | kWritable);
    }
    send_ctrl(wire::Ctrl::disconnect, 100);
    wait_sends_done(200);
    LockGuard lock(cq_mutex_);  // the flush below is ours, not the peer's fault
    if (state_ & kConnected) state_ = kDisconnected;
  }
  if (id_->qp) core::flush_qp(id_);
}

// As TCP: no peer before the connection is made (rdma-core 44 gives the
// address being connected to, or zeros); still one after the peer left.
int StreamSocket::peer_name(sockaddr* addr, socklen_t* len) {
  if (!(state_ & kConnected) && state_ != kDisconnected) return -ENOTCONN;
  return copy_addr(addr, &id_->route.addr.dst_addr, len);
}

int StreamSocket::sock_name(sockaddr* addr, socklen_t* len) {
  return copy_addr(addr, &id_->route.addr.src_addr, len);
}

bool StreamSocket::set_nonblocking(bool on) {
  int err = 0;
  if (id_->recv_cq_channel) err = set_fd_nonblocking(id_->recv_cq_channel->fd, on);
  if (state_ == kListening)
    err = set_fd_nonblocking(accept_queue_[0], on);
  else if (!err && state_ < kConnected)
    err = set_fd_nonblocking(id_->channel->fd, on);
  return !err;
}

int StreamSocket::set_flags(int flags) {
  if ((fd_flags_ & O_NONBLOCK) != (flags & O_NONBLOCK) && !set_nonblocking(flags & O_NONBLOCK))
    return -errno;
  fd_flags_ = flags;
  return 0;
}

void StreamSocket::handle_cm_event() {
  if (state_ & kOpening) {
    advance_connect();
    // An accepted connection's handshake ended: its listener takes it on
    // (and may delete it).
    if (listener_ && !(state_ & kOpening)) return listener_->finish_accept(this);
  } else if (!core::complete_pending(id_) && id_->event && (state_ & kConnected) &&
             id_->event->event == RDMA_CM_EVENT_DISCONNECTED) {
    // The peer (or its host) is gone without a word. Flushing the QP
    // completes the posted receives, which wakes a thread asleep on the CQ
    // in rrecv or rsend (rdma-core 44 leaves it asleep).
    {
      LockGuard lock(cq_mutex_);
      if (state_ & kWritable) peer_ended_.store(true, std::memory_order_release);
      state_ = kDisconnected;
    }
    core::flush_qp(id_);
  }
  if (!(state_ & kOpening)) announce_state_change(fd());
}

}  // namespace rdmacm::rsocket
