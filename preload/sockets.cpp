// socket, bind, listen, accept, accept4, connect, shutdown, getsockname,
// getpeername: the calls that make and name connections.
#include <netinet/in.h>
#include <rdma/rsocket.h>
#include <string.h>

#include "config.h"
#include "interpose.h"
#include "listener.h"
#include "trace.h"

using namespace rspreload;

namespace rspreload {

bool adopt(int fd, Kind kind, int rfd, int domain) {
  if (map_new(fd, kind, rfd, domain)) return true;
  int saved = errno;
  rclose(rfd);
  errno = saved;
  return false;
}

}  // namespace rspreload

namespace {

// rsocket() of a datagram socket makes a UDP socket of its own: that one must
// not become an rsocket in turn.
thread_local bool inside_rsocket;

int accept_common(int fd, sockaddr* addr, socklen_t* len, int flags, bool with_flags) {
  Entry* e = rsocket_entry(fd);
  if (!e) {
    Entry* pending = find_entry(fd);
    int nfd = with_flags ? real::accept4(fd, addr, len, flags) : real::accept(fd, addr, len);
    if (nfd < 0 || !pending || pending->fork != ForkRole::listening) return nfd;
    map_new(nfd, Kind::fork_pending, -1, pending->domain, ForkRole::passive);  // RDMA at first use
    return nfd;
  }
  if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) return fail(EINVAL);
  return accept_listener(fd, e, addr, len, flags);
}

// No RDMA path: from now on the placeholder, a kernel socket already carrying
// the options and flags the program set, is the program's socket.
void fall_back_to_kernel(Entry* e) {
  e->kind.store(Kind::kernel, std::memory_order_release);
  int saved = errno;
  rclose(e->rfd);
  errno = saved;
  e->rfd = -1;
}

// A bind that found the RDMA port taken, on a socket that asked to share it
// (SO_REUSEPORT, mirrored on the placeholder): the kernel socket takes the
// port if the kernel lets it (the holder shares it too).
bool shares_port(int fd, int err) {
  int on = 0;
  socklen_t len = sizeof on;
  return err == EADDRINUSE && real::getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, &len) == 0 && on;
}

}  // namespace

RSPRELOAD_EXPORT int socket(int domain, int type, int protocol) noexcept {
  int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (inside_rsocket || !wanted(domain, base, protocol))
    return real::socket(domain, type, protocol);
  int fd = make_placeholder(domain, type);
  if (fd < 0) return fd;
  int saved = errno;
  if (settings().fork_safe && base == SOCK_STREAM) {
    map_new(fd, Kind::fork_pending, -1, domain);
    errno = saved;
    return fd;
  }
  inside_rsocket = true;
  int rfd = rsocket(domain, base, protocol);
  inside_rsocket = false;
  if (rfd >= 0) {
    if (type & SOCK_NONBLOCK) rfcntl(rfd, F_SETFL, O_NONBLOCK);
    apply_settings(rfd);
    adopt(fd, Kind::rsocket, rfd, domain);
  } else {
    trace("fd %d: no rsocket (%s): the socket is kernel %s's", fd, strerror(errno),
          base == SOCK_STREAM ? "TCP" : "UDP");
  }
  // Without an RDMA device the kernel's socket is the program's socket.
  errno = saved;
  return fd;
}

RSPRELOAD_EXPORT int bind(int fd, const sockaddr* addr, socklen_t len) noexcept {
  Entry* e = rsocket_entry(fd);
  if (!e) return real::bind(fd, addr, len);
  int ret = rbind(e->rfd, addr, len);
  if (ret == 0 && addr && len <= sizeof e->bound) {
    memcpy(&e->bound, addr, len);
    e->bound_len = len;
  } else if (ret < 0 && (errno == EADDRNOTAVAIL || errno == ENODEV || shares_port(fd, errno))) {
    // No RDMA device has that address, or another socket holds its RDMA port
    // and this one asked to share the port (SO_REUSEPORT: the kernel shares
    // it among listeners; an RDMA port has one): the kernel socket takes it,
    // if the kernel lets it.
    bool sharing = errno == EADDRINUSE;
    char text[80];
    addr_text(addr, len, text);
    if (!settings().fall_back) {
      trace("fd %d: bind to %s: %s; not on a kernel socket (RS_FALLBACK=0)", fd, text,
            strerror(errno));
      return -1;
    }
    if (sharing && real::bind(fd, addr, len)) return -1;  // as the kernel would: still an rsocket
    trace("fd %d: bind to %s: %s; the socket is the kernel's from now on", fd, text,
          sharing ? "RDMA port taken, SO_REUSEPORT" : strerror(errno));
    fall_back_to_kernel(e);
    return sharing ? 0 : real::bind(fd, addr, len);
  }
  return ret;
}

RSPRELOAD_EXPORT int listen(int fd, int backlog) noexcept {
  if (Entry* e = rsocket_entry(fd)) {
    if (rlisten(e->rfd, backlog)) return -1;
    listen_on_kernel_too(fd, e, backlog);
    return 0;
  }
  int ret = real::listen(fd, backlog);
  Entry* pending = find_entry(fd);
  if (ret == 0 && pending && pending->kind.load() == Kind::fork_pending)
    pending->fork = ForkRole::listening;
  return ret;
}

RSPRELOAD_EXPORT int accept(int fd, sockaddr* addr, socklen_t* len) {
  return accept_common(fd, addr, len, 0, false);
}

RSPRELOAD_EXPORT int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return accept_common(fd, addr, len, flags, true);
}

RSPRELOAD_EXPORT int connect(int fd, const sockaddr* addr, socklen_t len) {
  Entry* e = find_entry(fd);
  if (e && e->kind.load(std::memory_order_acquire) == Kind::rsocket) {
    if (rconnect(e->rfd, addr, len) == 0) return 0;
    // Answers TCP would give too: EHOSTUNREACH is the kernel's neighbour
    // table giving up on the address (the route and neighbour TCP uses).
    if (errno == EINPROGRESS || errno == EALREADY || errno == EISCONN || errno == EINTR ||
        errno == EAGAIN || errno == EBADF || errno == EFAULT || errno == EINVAL ||
        errno == EHOSTUNREACH)
      return -1;
    char text[80];
    addr_text(addr, len, text);
    if (!settings().fall_back) {
      trace("fd %d: RDMA connect to %s failed: %s; no kernel TCP (RS_FALLBACK=0)", fd, text,
            strerror(errno));
      return -1;
    }
    trace("fd %d: RDMA connect to %s failed: %s; connecting over kernel TCP instead", fd, text,
          strerror(errno));
    fall_back_to_kernel(e);
    if (e->bound_len) real::bind(fd, reinterpret_cast<sockaddr*>(&e->bound), e->bound_len);
  } else if (e && e->kind.load(std::memory_order_acquire) == Kind::fork_pending) {
    e->fork = ForkRole::active;
  }
  return real::connect(fd, addr, len);
}

RSPRELOAD_EXPORT int shutdown(int fd, int how) noexcept {
  Entry* e = rsocket_entry(fd);
  if (!e) return real::shutdown(fd, how);
  int ret = rshutdown(e->rfd, how);
  // A listener that listens on kernel TCP too stops there as well (TCP's
  // shutdown of a listener): an accept asleep on both sides wakes, EINVAL.
  if (ret == 0 && e->twin.load(std::memory_order_acquire)) {
    int saved = errno;
    real::shutdown(fd, how);
    errno = saved;
  }
  return ret;
}

RSPRELOAD_EXPORT int getsockname(int fd, sockaddr* addr, socklen_t* len) noexcept {
  Entry* e = rsocket_entry(fd);
  return e ? rgetsockname(e->rfd, addr, len) : real::getsockname(fd, addr, len);
}

RSPRELOAD_EXPORT int getpeername(int fd, sockaddr* addr, socklen_t* len) noexcept {
  Entry* e = rsocket_entry(fd);
  return e ? rgetpeername(e->rfd, addr, len) : real::getpeername(fd, addr, len);
}
