// Reading and writing an int-sized socket option value as the kernel's
// setsockopt / getsockopt do, with the checks rdma-core 44 lacks: a pointer
// the process cannot reach is EFAULT, a short (or negative) length to set
// EINVAL; to get, a short room takes the value's first bytes and a negative
// one is EINVAL (caller_memory.h).
#pragma once

#include <sys/socket.h>

#include <cerrno>

#include "rsocket/caller_memory.h"

namespace rdmacm::rsocket {

inline int read_int(const void* value, socklen_t len, int* out) {
  if (!value) return -EFAULT;
  if (static_cast<int>(len) < static_cast<int>(sizeof(int))) return -EINVAL;
  return copy_from_caller(out, value, sizeof(int));
}

inline int write_int(void* value, socklen_t* len, int v) {
  return give_option(&v, sizeof(v), value, len);
}

}  // namespace rdmacm::rsocket
