#include "fork_peer.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>

#include "real_calls.h"

namespace rspreload {

namespace {

// tcp_peer_now, and whether a `quiet` answer was a partial announcement
// (bytes there, so poll() would not sleep).
TcpPeer peek(int fd, bool* partial) {
  *partial = false;
  unsigned char buf[4];
  int saved = errno;
  ssize_t n = real::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  int err = errno;
  errno = saved;
  if (n == 0) return TcpPeer::closed;
  if (n < 0) return err == EAGAIN || err == EWOULDBLOCK || err == EINTR ? TcpPeer::quiet
                                                                       : TcpPeer::closed;
  for (ssize_t i = 0; i < n; i++)
    if (buf[i]) return TcpPeer::data;
  if (n == sizeof buf) return TcpPeer::zero;
  // Zeros so far: the announcement unless the stream ends before its 4 bytes.
  pollfd p{fd, POLLRDHUP, 0};
  if (real::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
    errno = saved;
    return TcpPeer::data;
  }
  errno = saved;
  *partial = true;
  return TcpPeer::quiet;
}

}  // namespace

TcpPeer tcp_peer_now(int fd) {
  bool partial;
  return peek(fd, &partial);
}

TcpPeer await_announcement(int fd, const Deadline& d) {
  int saved = errno;
  for (;;) {
    bool partial;
    TcpPeer s = peek(fd, &partial);
    int left = d.left_ms();
    if (s != TcpPeer::quiet || !left) {
      errno = saved;
      return s;
    }
    if (partial) {
      timespec pause{0, 1000000};  // the rest of the 4 bytes is on its way
      nanosleep(&pause, nullptr);
      continue;
    }
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    real::poll(&p, 1, left);
  }
}

TcpPeer tcp_peer_bytes(int fd) {
  unsigned char b;
  int saved = errno;
  ssize_t n = real::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  int err = errno;
  errno = saved;
  if (n > 0) return TcpPeer::data;
  if (n == 0) return TcpPeer::closed;
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR ? TcpPeer::quiet : TcpPeer::closed;
}

TcpPeer await_close(int fd, const Deadline& d) {
  int saved = errno;
  for (;;) {
    TcpPeer s = tcp_peer_bytes(fd);
    int left = d.left_ms();
    if (s != TcpPeer::quiet || !left) {
      errno = saved;
      return s;
    }
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    real::poll(&p, 1, left);
  }
}

bool same_host(const sockaddr* a, socklen_t alen, const sockaddr* b, socklen_t blen) {
  // Both as IPv6 (an IPv4 address in its mapped form).
  auto as_v6 = [](const sockaddr* s, socklen_t len, in6_addr* out) {
    if (s->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
      memset(out, 0, sizeof *out);
      out->s6_addr[10] = out->s6_addr[11] = 0xff;
      memcpy(&out->s6_addr[12], &reinterpret_cast<const sockaddr_in*>(s)->sin_addr, 4);
      return true;
    }
    if (s->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
      *out = reinterpret_cast<const sockaddr_in6*>(s)->sin6_addr;
      return true;
    }
    return false;
  };
  in6_addr x, y;
  if (!a || !b || !as_v6(a, alen, &x) || !as_v6(b, blen, &y)) return false;
  return memcmp(&x, &y, sizeof x) == 0;
}

void unmap_v4(sockaddr_storage* a, socklen_t* len) {
  if (a->ss_family != AF_INET6 || *len < sizeof(sockaddr_in6)) return;
  const sockaddr_in6 six = *reinterpret_cast<sockaddr_in6*>(a);
  if (!IN6_IS_ADDR_V4MAPPED(&six.sin6_addr)) return;
  sockaddr_in four{};
  four.sin_family = AF_INET;
  four.sin_port = six.sin6_port;
  memcpy(&four.sin_addr, &six.sin6_addr.s6_addr[12], 4);
  memset(a, 0, sizeof *a);
  memcpy(a, &four, sizeof four);
  *len = sizeof four;
}

}  // namespace rspreload
