// read, readv, recv, recvfrom, recvmsg, write, writev, send, sendto, sendmsg,
// sendfile (and the _FORTIFY_SOURCE entry points __read_chk, __recv_chk,
// __recvfrom_chk, which programs built by Debian call instead): on an rsocket
// the r* call, otherwise libc's. One atomic load decides.
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdlib.h>

#include "interpose.h"

using namespace rspreload;

extern "C" [[noreturn]] void __chk_fail(void);

namespace {

// As the kernel's TCP: a send that fails with EPIPE (our writing shut, the
// peer gone) raises SIGPIPE at the calling thread unless the call says
// MSG_NOSIGNAL; write, writev and sendfile cannot say it. The r* calls never
// raise it (as rdma-core's): the preload does, for programs written for
// TCP. Not for a datagram rsocket (UDP raises none): its placeholder, a
// kernel socket of the same type, tells.
ssize_t sigpipe_on_epipe(int fd, ssize_t ret, int flags) {
  if (ret >= 0 || errno != EPIPE || (flags & MSG_NOSIGNAL)) return ret;
  int type = 0;
  socklen_t len = sizeof(type);
  if (real::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type != SOCK_STREAM)
    return fail(EPIPE);
  raise(SIGPIPE);  // thread-directed, as pthread_kill(pthread_self())
  return fail(EPIPE);
}

}  // namespace

RSPRELOAD_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  Entry* e = rsocket_entry(fd);
  return e ? rread(e->rfd, buf, n) : real::read(fd, buf, n);
}

RSPRELOAD_EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen) __chk_fail();
  return read(fd, buf, n);
}

RSPRELOAD_EXPORT ssize_t readv(int fd, const iovec* iov, int count) {
  Entry* e = rsocket_entry(fd);
  return e ? rreadv(e->rfd, iov, count) : real::readv(fd, iov, count);
}

RSPRELOAD_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  Entry* e = rsocket_entry(fd);
  return e ? rrecv(e->rfd, buf, n, flags) : real::recv(fd, buf, n, flags);
}

RSPRELOAD_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (n > buflen) __chk_fail();
  return recv(fd, buf, n, flags);
}

RSPRELOAD_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from,
                                  socklen_t* len) {
  Entry* e = rsocket_entry(fd);
  return e ? rrecvfrom(e->rfd, buf, n, flags, from, len)
           : real::recvfrom(fd, buf, n, flags, from, len);
}

RSPRELOAD_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags,
                                        sockaddr* from, socklen_t* len) {
  if (n > buflen) __chk_fail();
  return recvfrom(fd, buf, n, flags, from, len);
}

RSPRELOAD_EXPORT ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  Entry* e = rsocket_entry(fd);
  return e ? rrecvmsg(e->rfd, msg, flags) : real::recvmsg(fd, msg, flags);
}

RSPRELOAD_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  Entry* e = rsocket_entry(fd);
  return e ? sigpipe_on_epipe(fd, rwrite(e->rfd, buf, n), 0) : real::write(fd, buf, n);
}

RSPRELOAD_EXPORT ssize_t writev(int fd, const iovec* iov, int count) {
  Entry* e = rsocket_entry(fd);
  return e ? sigpipe_on_epipe(fd, rwritev(e->rfd, iov, count), 0) : real::writev(fd, iov, count);
}

RSPRELOAD_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  Entry* e = rsocket_entry(fd);
  return e ? sigpipe_on_epipe(fd, rsend(e->rfd, buf, n, flags), flags)
           : real::send(fd, buf, n, flags);
}

// On a connected stream rsendto ignores the address, as TCP does (rdma-core's
// fails with EISCONN, which breaks sockperf).
RSPRELOAD_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to,
                                socklen_t len) {
  Entry* e = rsocket_entry(fd);
  return e ? sigpipe_on_epipe(fd, rsendto(e->rfd, buf, n, flags, to, len), flags)
           : real::sendto(fd, buf, n, flags, to, len);
}

RSPRELOAD_EXPORT ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  Entry* e = rsocket_entry(fd);
  return e ? sigpipe_on_epipe(fd, rsendmsg(e->rfd, msg, flags), flags)
           : real::sendmsg(fd, msg, flags);
}

namespace {

// sendfile onto an rsocket: the file is read in chunks and written with
// rwrite. What was read and could not be sent (a non-blocking rsocket) is
// given back: *offset counts only what went, or the file position is moved
// back.
template <typename Off>
ssize_t send_file(int rfd, int in, Off* offset, size_t count) {
  constexpr size_t kChunk = 256 * 1024;
  char* buf = static_cast<char*>(malloc(count < kChunk ? count ? count : 1 : kChunk));
  if (!buf) return fail(ENOMEM);
  size_t total = 0;
  int err = 0;
  while (total < count) {
    size_t want = count - total < kChunk ? count - total : kChunk;
    ssize_t got = offset ? pread(in, buf, want, *offset + static_cast<Off>(total))
                         : real::read(in, buf, want);
    if (got <= 0) {
      if (got < 0) err = errno;
      break;
    }
    size_t sent = 0;
    while (sent < static_cast<size_t>(got)) {
      ssize_t w = rwrite(rfd, buf + sent, got - sent);
      if (w <= 0) {
        err = w < 0 ? errno : EIO;
        break;
      }
      sent += w;
    }
    total += sent;
    if (sent < static_cast<size_t>(got)) {
      if (!offset) lseek(in, -static_cast<off_t>(got - sent), SEEK_CUR);
      break;
    }
  }
  free(buf);
  if (offset) *offset += static_cast<Off>(total);
  if (total == 0 && err) return fail(err);
  return static_cast<ssize_t>(total);
}

}  // namespace

RSPRELOAD_EXPORT ssize_t sendfile(int out, int in, off_t* offset, size_t count) noexcept {
  Entry* e = rsocket_entry(out);
  return e ? sigpipe_on_epipe(out, send_file(e->rfd, in, offset, count), 0)
           : real::sendfile(out, in, offset, count);
}

RSPRELOAD_EXPORT ssize_t sendfile64(int out, int in, off64_t* offset, size_t count) noexcept {
  Entry* e = rsocket_entry(out);
  return e ? sigpipe_on_epipe(out, send_file(e->rfd, in, offset, count), 0)
           : real::sendfile64(out, in, offset, count);
}
