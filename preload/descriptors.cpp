// close, close_range, dup, dup2, dup3, fcntl, fcntl64, ioctl (FIONBIO, FIONREAD): the calls on
// descriptor numbers. dup()s share their placeholder's entry, as the kernel
// shares one open socket between its descriptors; the rsocket closes with the
// last of them.
#include <linux/close_range.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "interpose.h"

using namespace rspreload;

namespace {

// `nfd` is a new descriptor for what `fd` was (dup, F_DUPFD, dup2, dup3).
// What `nfd` stood for before (dup2/dup3 closed it) is dropped by map_fd or
// here; when it already shared `fd`'s entry (dup2 of a descriptor onto itself
// or onto one of its dups), the count goes up and down again.
int share(int fd, int nfd) {
  if (nfd < 0) return nfd;
  Entry* e = find_entry(fd);
  if (e) {
    e->refs.fetch_add(1, std::memory_order_acq_rel);
    if (!map_fd(nfd, e)) release(e);
  } else if (Entry* stale = unmap_fd(nfd)) {
    release(stale);  // dup2/dup3 closed what nfd was
  }
  return nfd;
}

// The argument is read as glibc's fcntl reads it: one word, whatever cmd.
template <typename Next>
int fcntl_common(Next& next, int fd, int cmd, va_list ap) {
  unsigned long arg = va_arg(ap, unsigned long);
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC:
      return share(fd, next(fd, cmd, arg));
    case F_SETFL:
      if (Entry* e = rsocket_entry(fd)) {
        if (rfcntl(e->rfd, F_SETFL, static_cast<int>(arg)) < 0) return -1;
      }
      return next(fd, cmd, arg);
    default:
      // The placeholder answers the rest: F_GETFL (kept equal to the
      // rsocket's), descriptor flags, owners, locks.
      return next(fd, cmd, arg);
  }
}

// FIONREAD (SIOCINQ) on an rsocket: the bytes a read takes now, as the
// kernel's (a stream's queued bytes, a datagram's next message size, 0 when
// nothing waits). The r* calls have no ioctl: a peek that never waits tells,
// a stream's into scratch room as large as its receive buffer (all it can
// hold), a datagram's with MSG_TRUNC (its whole size). The placeholder, a
// kernel socket of the same type, tells which.
int bytes_readable(int fd, Entry* e, void* arg) {
  if (!arg) return fail(EFAULT);
  int type = SOCK_STREAM;
  socklen_t len = sizeof(type);
  real::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
  char one;
  ssize_t n;
  if (type == SOCK_STREAM) {
    int size = 0;
    len = sizeof(size);
    if (rgetsockopt(e->rfd, SOL_SOCKET, SO_RCVBUF, &size, &len) || size <= 0) size = 1 << 20;
    void* scratch = malloc(static_cast<size_t>(size));
    if (!scratch) return fail(ENOMEM);
    n = rrecv(e->rfd, scratch, static_cast<size_t>(size), MSG_PEEK | MSG_DONTWAIT);
    free(scratch);
  } else {
    n = rrecv(e->rfd, &one, 1, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC);
  }
  *static_cast<int*>(arg) = n > 0 ? static_cast<int>(n) : 0;
  return 0;
}

}  // namespace

RSPRELOAD_EXPORT int close(int fd) {
  Entry* e = unmap_fd(fd);
  int ret = real::close(fd);
  if (e) {
    int saved = errno;
    int closed = release(e);
    if (ret == 0 && closed < 0) return -1;
    errno = saved;
  }
  return ret;
}

RSPRELOAD_EXPORT int close_range(unsigned first, unsigned last, int flags) noexcept {
  int ret = real::close_range(first, last, flags);
  if (ret == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) {
    for (unsigned fd = first; fd <= last && fd < (1u << 20); fd++) {
      if (Entry* e = unmap_fd(static_cast<int>(fd))) release(e);
    }
  }
  return ret;
}

RSPRELOAD_EXPORT int dup(int fd) noexcept { return share(fd, real::dup(fd)); }

RSPRELOAD_EXPORT int dup2(int fd, int nfd) noexcept { return share(fd, real::dup2(fd, nfd)); }

RSPRELOAD_EXPORT int dup3(int fd, int nfd, int flags) noexcept {
  return share(fd, real::dup3(fd, nfd, flags));
}

RSPRELOAD_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  int ret = fcntl_common(real::fcntl, fd, cmd, ap);
  va_end(ap);
  return ret;
}

RSPRELOAD_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  int ret = fcntl_common(real::fcntl64, fd, cmd, ap);
  va_end(ap);
  return ret;
}

RSPRELOAD_EXPORT int ioctl(int fd, unsigned long request, ...) noexcept {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (request == FIONREAD) {
    if (Entry* e = rsocket_entry(fd)) return bytes_readable(fd, e, arg);
  }
  if (request == FIONBIO && arg) {
    if (Entry* e = rsocket_entry(fd)) {
      int flags = real::fcntl(fd, F_GETFL);
      if (flags < 0) return -1;
      flags = *static_cast<int*>(arg) ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
      if (rfcntl(e->rfd, F_SETFL, flags) < 0) return -1;
    }
  }
  return real::ioctl(fd, request, arg);
}
