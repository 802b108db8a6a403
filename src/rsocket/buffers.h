// Buffers to register, in whole pages: fork with RDMAV_FORK_SAFE unmaps by
// page, so a registered buffer must never share a page with the heap.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace rdmacm::rsocket {

inline void* forksafe_alloc(size_t len) {
  long page = sysconf(_SC_PAGESIZE);
  len = (len + page - 1) / page * page;
  void* p = nullptr;
  if (posix_memalign(&p, static_cast<size_t>(page), len)) return nullptr;
  std::memset(p, 0, len);
  return p;
}

}  // namespace rdmacm::rsocket
