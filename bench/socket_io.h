// Whole reads and writes for the socket benchmarks (conn_memory, conn_cycle).
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace bench {

// All of p, on a blocking descriptor or a non-blocking one (waiting in poll
// while it is full).
inline bool write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EAGAIN) {
      pollfd w{fd, POLLOUT, 0};
      poll(&w, 1, 1000);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// All of n bytes, or false (an error, or end-of-file first).
inline bool read_all(int fd, char* p, size_t n) {
  while (n) {
    ssize_t k = read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

}  // namespace bench
