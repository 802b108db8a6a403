// Small pieces both socket types share: the monotonic clock in microseconds,
// rdma-core 44's wait for completions (spin for polling_time, then sleep), and
// buffers in whole pages (fork with RDMAV_FORK_SAFE unmaps by page, so a
// registered buffer must never share a page with the heap).
#pragma once

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "rsocket/config.h"

namespace rdmacm::rsocket {

inline uint64_t now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000 + static_cast<uint64_t>(t.tv_nsec) / 1000;
}

// process(nonblock) returns 0 when what the caller waits for holds,
// -EWOULDBLOCK when it would have to sleep, else -errno. Looks without
// sleeping for up to polling_time microseconds, then (unless nonblock) once
// more allowed to sleep.
template <typename Process>
int spin_then_sleep(bool nonblock, Process&& process) {
  uint64_t start = 0;
  for (;;) {
    int ret = process(true);
    if (!ret || nonblock || ret != -EWOULDBLOCK) return ret;
    if (!start) start = now_us();
    if (now_us() - start > config().polling_time) break;
  }
  return process(false);
}

inline void* forksafe_alloc(size_t len) {
  long page = sysconf(_SC_PAGESIZE);
  len = (len + page - 1) / page * page;
  void* p = nullptr;
  if (posix_memalign(&p, static_cast<size_t>(page), len)) return nullptr;
  std::memset(p, 0, len);
  return p;
}

}  // namespace rdmacm::rsocket
