// The monotonic clock in microseconds, for the wing's bounded waits.
#pragma once

#include <time.h>

#include <cstdint>

namespace rdmacm::rsocket {

inline uint64_t now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000 + static_cast<uint64_t>(t.tv_nsec) / 1000;
}

}  // namespace rdmacm::rsocket
