// sendmmsg and recvmmsg on an rsocket: each message through rsendmsg or
// rrecvmsg in turn, with the kernel's batch semantics (net/socket.c): the
// count done, an error only if the first message fails; msg_len filled in
// for each one done; at most UIO_MAXIOV messages a call; MSG_WAITFORONE
// makes every receive after the first non-blocking; a timeout is checked
// after each message received (a receive still blocks as long as it must,
// as the kernel's) and gets what is left of it. Stream rsockets too: the
// kernel allows both calls on TCP (each message one send or receive).
#include <limits.h>
#include <rdma/rsocket.h>
#include <time.h>

#include "interpose.h"

using namespace rspreload;

namespace {

constexpr unsigned kMaxBatch = 1024;  // UIO_MAXIOV

long long ns_of(const timespec& t) { return t.tv_sec * 1000000000LL + t.tv_nsec; }

timespec now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

}  // namespace

RSPRELOAD_EXPORT int sendmmsg(int fd, mmsghdr* vec, unsigned int vlen, int flags) {
  Entry* e = rsocket_entry(fd);
  if (!e) return real::sendmmsg(fd, vec, vlen, flags);
  if (vlen > kMaxBatch) vlen = kMaxBatch;
  if (!vec && vlen) return fail(EFAULT);
  unsigned done = 0;
  for (; done < vlen; ++done) {
    ssize_t n = rsendmsg(e->rfd, &vec[done].msg_hdr, flags);
    if (n < 0) break;
    vec[done].msg_len = static_cast<unsigned>(n);
  }
  return done || !vlen ? static_cast<int>(done) : -1;
}

RSPRELOAD_EXPORT int recvmmsg(int fd, mmsghdr* vec, unsigned int vlen, int flags,
                              timespec* timeout) {
  Entry* e = rsocket_entry(fd);
  if (!e) return real::recvmmsg(fd, vec, vlen, flags, timeout);
  long long end = 0;
  if (timeout) {
    if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000L)
      return fail(EINVAL);
    end = ns_of(now()) + ns_of(*timeout);
  }
  if (vlen > kMaxBatch) vlen = kMaxBatch;
  if (!vec && vlen) return fail(EFAULT);
  unsigned done = 0;
  int each = flags & ~MSG_WAITFORONE;
  while (done < vlen) {
    ssize_t n = rrecvmsg(e->rfd, &vec[done].msg_hdr, each);
    if (n < 0) break;
    vec[done].msg_len = static_cast<unsigned>(n);
    ++done;
    if (flags & MSG_WAITFORONE) each |= MSG_DONTWAIT;
    if (timeout) {
      long long left = end - ns_of(now());
      if (left < 0) left = 0;
      timeout->tv_sec = static_cast<time_t>(left / 1000000000LL);
      timeout->tv_nsec = static_cast<long>(left % 1000000000LL);
      if (!left) break;
    }
  }
  return done || !vlen ? static_cast<int>(done) : -1;
}
