// setsockopt and getsockopt. An option rsockets have is the rsocket's; one
// they lack (TCP_INFO, TCP_CONGESTION, SO_TYPE, IP_TOS ...) is answered by
// the placeholder, a kernel socket of the same kind, so programs written for
// TCP see what TCP would say instead of an error. Every option set reaches
// the placeholder too, so a connection that falls back to TCP keeps them.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include "interpose.h"

using namespace rspreload;

RSPRELOAD_EXPORT int setsockopt(int fd, int level, int name, const void* value,
                                socklen_t len) noexcept {
  Entry* e = rsocket_entry(fd);
  if (!e) return real::setsockopt(fd, level, name, value, len);
  int ret = rsetsockopt(e->rfd, level, name, value, len);
  if (level == SOL_RDMA) return ret;
  int err = errno;
  int mirrored = real::setsockopt(fd, level, name, value, len);
  if (ret == 0) return 0;
  if (unsupported(err)) return mirrored;
  return fail(err);
}

RSPRELOAD_EXPORT int getsockopt(int fd, int level, int name, void* value,
                                socklen_t* len) noexcept {
  Entry* e = rsocket_entry(fd);
  if (!e) return real::getsockopt(fd, level, name, value, len);
  if (rgetsockopt(e->rfd, level, name, value, len) == 0) return 0;
  if (level == SOL_RDMA || !unsupported(errno)) return -1;
  if (real::getsockopt(fd, level, name, value, len) < 0) return -1;
  if (level == IPPROTO_TCP && name == TCP_INFO && value && *len >= 1) {
    // The placeholder never connected; the rsocket's state is what counts.
    sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    bool connected = rgetpeername(e->rfd, reinterpret_cast<sockaddr*>(&peer), &plen) == 0;
    static_cast<tcp_info*>(value)->tcpi_state = connected ? TCP_ESTABLISHED : TCP_CLOSE;
  }
  return 0;
}
