#include "fork.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <semaphore.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fork_peer.h"
#include "interpose.h"

namespace rspreload {
namespace {

// The passive side's listener backlog, and how many connections from the TCP
// peer's host it holds while it waits (one past them is refused).
constexpr int kBacklog = 8;

// After the TCP peer's close, how long the passive side still takes
// connections before it judges those it has (fork_peer.h's waits bound the
// rest).
constexpr int kSettleMs = 200;

// Non-blocking flag, SO_REUSEADDR and TCP_NODELAY carry over from the TCP
// socket to the rsocket (what rdma-core's preload copies).
void copy_options(int fd, int rfd) {
  int flags = real::fcntl(fd, F_GETFL);
  if (flags > 0) rfcntl(rfd, F_SETFL, flags);
  for (auto [level, name] : {std::pair{SOL_SOCKET, SO_REUSEADDR}, {IPPROTO_TCP, TCP_NODELAY}}) {
    int v = 0;
    socklen_t len = sizeof v;
    if (real::getsockopt(fd, level, name, &v, &len) == 0 && v)
      rsetsockopt(rfd, level, name, &v, len);
  }
}

// rconnect within `d`: 0 when connected (the rsocket left blocking).
int connect_within(int rfd, const sockaddr* to, socklen_t len, const Deadline& d) {
  if (rfcntl(rfd, F_SETFL, O_NONBLOCK) < 0) return -1;
  if (rconnect(rfd, to, len) && errno != EINPROGRESS) return -1;
  for (;;) {
    int left = d.left_ms();
    if (!left) return -1;
    pollfd p{rfd, POLLOUT, 0};
    int n = rpoll(&p, 1, left);
    if (n < 0 && errno != EINTR) return -1;
    if (n <= 0) continue;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return -1;
    if (p.revents & POLLOUT) break;
  }
  int err = 0;
  socklen_t elen = sizeof err;
  if (rgetsockopt(rfd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) return -1;
  return rfcntl(rfd, F_SETFL, 0) < 0 ? -1 : 0;
}

// An rsocket connected to where `fd` is, from where `fd` is, or -1.
int connect_to_peer(int fd) {
  sockaddr_storage peer;
  socklen_t len = sizeof peer;
  sockaddr_storage local;
  socklen_t llen = sizeof local;
  if (real::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) ||
      real::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen))
    return -1;
  unmap_v4(&peer, &len);  // a dual-stack socket's IPv4 connection: an IPv4 rsocket
  unmap_v4(&local, &llen);
  int rfd = rsocket(peer.ss_family, SOCK_STREAM, 0);
  if (rfd < 0) return -1;
  // From the TCP connection's own address and port (the RDMA CM's ports are
  // not the kernel's TCP ports), by which the passive side knows it. Where
  // that is refused (the port taken in the RDMA CM's space, perhaps by an
  // impostor that would pass for us; the address on no RDMA device, which
  // the passive side would refuse) the connection stays on TCP.
  if (rbind(rfd, reinterpret_cast<sockaddr*>(&local), llen) ||
      connect_within(rfd, reinterpret_cast<sockaddr*>(&peer), len, Deadline::in(kConnectWaitMs))) {
    rclose(rfd);
    return -1;
  }
  return rfd;
}

// The connecting side: wait for the peer's zero, then connect an rsocket to
// the address the TCP connection reached, from the TCP connection's address.
// Anything else than the zero within the wait (bytes, the end of the stream,
// nothing) leaves it on TCP, the bytes unread. A zero followed by a failed
// connect leaves it on TCP without the zero: it was the peer's announcement,
// not data (rdma-core 44 leaves it for the program to read).
int move_active(int fd) {
  if (await_announcement(fd, Deadline::in(kAnnouncementWaitMs)) != TcpPeer::zero) return -1;
  int rfd = connect_to_peer(fd);
  if (rfd < 0) {
    uint32_t zero;
    real::recv(fd, &zero, sizeof zero, MSG_DONTWAIT);  // peeked: all 4 bytes are there
  }
  return rfd;
}

// rdma-core's host-wide "/rsocket_fork" (one move's listener at a time),
// waited for at most kSemaphoreWaitMs (fork_peer.h says why and what then).
class ForkSemaphore {
 public:
  ForkSemaphore() {
    sem_ = sem_open("/rsocket_fork", O_CREAT | O_RDWR, S_IRWXU | S_IRWXG, 1);
    if (sem_ == SEM_FAILED) return;
    timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += kSemaphoreWaitMs / 1000;
    until.tv_nsec += (kSemaphoreWaitMs % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    int ret;
    while ((ret = sem_timedwait(sem_, &until)) && errno == EINTR) {
    }
    post_ = ret == 0 || errno == ETIMEDOUT;
  }
  ~ForkSemaphore() {
    if (sem_ == SEM_FAILED) return;
    if (post_) sem_post(sem_);
    sem_close(sem_);
  }
  ForkSemaphore(const ForkSemaphore&) = delete;
  ForkSemaphore& operator=(const ForkSemaphore&) = delete;

 private:
  sem_t* sem_;
  bool post_ = false;
};

// The RDMA connections a passive move's listener took while it waits. The
// listener accepts every request as it comes (rsockets' listen service), so
// a genuine peer's rconnect returns, and the peer closes its TCP connection,
// whether or not an impostor's connection came first: the close says "it is
// here", the address and port say which.
class Candidates {
 public:
  ~Candidates() {
    for (int i = 0; i < n_; i++) rclose(fd_[i]);
  }
  // Takes connection `c` if it comes from the TCP peer's host, else refuses it.
  void offer(int c, const sockaddr* peer, socklen_t plen) {
    sockaddr_storage& from = from_[n_ < kBacklog ? n_ : 0];
    socklen_t flen = sizeof from;
    if (n_ < kBacklog && !rgetpeername(c, reinterpret_cast<sockaddr*>(&from), &flen) &&
        same_host(reinterpret_cast<sockaddr*>(&from), flen, peer, plen)) {
      fd_[n_++] = c;
      return;
    }
    rclose(c);
  }
  // The candidate from the TCP peer's own port (ours binds its rsocket to its
  // TCP port; rdma-core 44's connects from any port), else with `only` the
  // single candidate held; -1 when none is sure. The one returned is the
  // caller's, the others are refused with this object.
  int pick(const sockaddr* peer, bool only) {
    int at = -1;
    for (int i = 0; i < n_ && at < 0; i++)
      if (port_of(reinterpret_cast<sockaddr*>(&from_[i])) == port_of(peer)) at = i;
    if (at < 0 && only && n_ == 1) at = 0;
    if (at < 0) return -1;
    int c = fd_[at];
    fd_[at] = fd_[--n_];
    from_[at] = from_[n_];
    return c;
  }

 private:
  static int port_of(const sockaddr* a) {
    if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
    if (a->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
    return -1;
  }
  int fd_[kBacklog];
  sockaddr_storage from_[kBacklog];
  int n_ = 0;
};

// The RDMA connection of the TCP peer on `fd` from listener `lfd` within
// `d`, or -1: a connection from the TCP peer's host, after which the TCP
// peer closes its TCP connection without a byte (what a genuine mover does
// once its rconnect returns, and no other process can do for it). Bytes from
// the TCP peer end the wait at once (it talks TCP); so does its close, after
// kSettleMs for the connection that preceded it to reach the listener's
// queue, when no candidate or more than one is left (one of them is an
// impostor, and which cannot be told: none is taken).
int accept_peer(int lfd, int fd, const sockaddr* peer, socklen_t plen, const Deadline& d) {
  Candidates held;
  bool closed = false;
  Deadline settle{};
  for (;;) {
    int left = (closed ? settle : d).left_ms();
    pollfd p[2] = {{lfd, POLLIN, 0}, {fd, POLLIN | POLLRDHUP, 0}};
    int n = rpoll(p, closed ? 1 : 2, left);
    if (n < 0 && errno != EINTR) return -1;
    if (!closed && p[1].revents) {
      TcpPeer s = tcp_peer_bytes(fd);
      if (s == TcpPeer::data) return -1;
      if (s == TcpPeer::closed) {
        closed = true;
        settle = Deadline::in(kSettleMs);
      }
    }
    if (n > 0 && (p[0].revents & POLLIN)) {
      int c = raccept(lfd, nullptr, nullptr);
      if (c >= 0)
        held.offer(c, peer, plen);
      else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        return -1;
    }
    if (closed) {
      int c = held.pick(peer, false);
      if (c >= 0) return c;
    }
    if (!left) return closed ? held.pick(peer, true) : -1;
  }
}

// A listener on `at` (SO_REUSEADDR, non-blocking, kBacklog), or -1.
int listen_at(const sockaddr_storage& at, socklen_t len) {
  int lfd = rsocket(at.ss_family, SOCK_STREAM, 0);
  if (lfd < 0) return -1;
  int one = 1;
  rsetsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (rbind(lfd, reinterpret_cast<const sockaddr*>(&at), len) == 0 &&
      rfcntl(lfd, F_SETFL, O_NONBLOCK) == 0 && rlisten(lfd, kBacklog) == 0)
    return lfd;
  rclose(lfd);
  return -1;
}

// The listener of a passive move: on the TCP connection's own address and
// port, where the peer's rconnect goes. Bound there, it opens the RDMA
// device now, before the announcement starts the peer's clock (bound to the
// wildcard, it would open it on the first connection request, within that
// wait: over a second on a loaded host, where the peer's own start-up takes
// as long). Where the address is on no RDMA device, the wildcard, as
// rdma-core 44 listens (and where it is an IPv4-mapped address: a
// dual-stack listener's family kept, whatever the peer's rconnect names).
int listen_for_peer(sockaddr_storage local, socklen_t len) {
  int lfd = listen_at(local, len);
  if (lfd >= 0) return lfd;
  if (local.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr = INADDR_ANY;
  else
    reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr = in6addr_any;
  return listen_at(local, len);
}

// The accepting side: listen on an rsocket at the TCP connection's port (one
// process at a time), tell the peer with a zero, accept its RDMA connection.
// A peer that has sent bytes or closed already talks TCP: it is told nothing.
int move_passive(int fd) {
  if (tcp_peer_bytes(fd) != TcpPeer::quiet) return -1;
  sockaddr_storage local, peer;
  socklen_t len = sizeof local, plen = sizeof peer;
  if (real::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) ||
      real::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen))
    return -1;
  ForkSemaphore one_at_a_time;
  int lfd = listen_for_peer(local, len);
  if (lfd < 0) return -1;
  int rfd = -1;
  uint32_t zero = 0;
  if (real::send(fd, &zero, sizeof zero, MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof zero)
    rfd = accept_peer(lfd, fd, reinterpret_cast<sockaddr*>(&peer), plen,
                      Deadline::in(kPeerWaitMs));
  rclose(lfd);
  return rfd;
}

Kind move(int fd, Entry* e) {
  int saved = errno;
  int rfd = e->fork == ForkRole::active ? move_active(fd) : move_passive(fd);
  Kind k = Kind::kernel;  // the connection stays on TCP
  if (rfd >= 0) {
    apply_settings(rfd);
    copy_options(fd, rfd);
    real::shutdown(fd, SHUT_RDWR);
    e->rfd = rfd;
    k = Kind::rsocket;
  }
  e->kind.store(k, std::memory_order_release);
  errno = saved;
  return k;
}

}  // namespace

Kind settle_fork(int fd, Entry* e) {
  // The move's own calls reach the interposer again (rpoll polls the TCP
  // socket with poll(), which is ours): there the socket is still its TCP
  // self.
  thread_local Entry* moving;
  if (moving == e) return Kind::fork_pending;
  for (;;) {
    Kind k = e->kind.load(std::memory_order_acquire);
    if (k != Kind::fork_pending || (e->fork != ForkRole::active && e->fork != ForkRole::passive))
      return k;
    pid_t me = getpid(), mover = 0;
    if (e->mover.compare_exchange_strong(mover, me, std::memory_order_acq_rel)) {
      k = e->kind.load(std::memory_order_acquire);  // another thread may have just finished
      if (k == Kind::fork_pending) {
        moving = e;
        k = move(fd, e);
        moving = nullptr;
      }
      e->mover.store(0, std::memory_order_release);
      return k;
    }
    if (mover != me) {
      // Forked while a thread of the parent moved this socket: the move and
      // its outcome are the parent's; this process keeps the TCP socket.
      e->kind.store(Kind::kernel, std::memory_order_release);
      e->mover.store(0, std::memory_order_release);
      return Kind::kernel;
    }
    timespec pause{0, 1000000};  // another thread moves this socket (bounded)
    nanosleep(&pause, nullptr);
  }
}

}  // namespace rspreload
