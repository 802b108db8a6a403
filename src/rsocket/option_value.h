// Reading and writing an int-sized socket option value, with the checks
// rdma-core 44 lacks: a NULL pointer is EFAULT, a short length EINVAL.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace rdmacm::rsocket {

inline int read_int(const void* value, socklen_t len, int* out) {
  if (!value) return -EFAULT;
  if (len < sizeof(int)) return -EINVAL;
  std::memcpy(out, value, sizeof(int));
  return 0;
}

inline int write_int(void* value, socklen_t* len, int v) {
  if (!value || !len) return -EFAULT;
  if (*len < sizeof(int)) return -EINVAL;
  std::memcpy(value, &v, sizeof(int));
  *len = sizeof(int);
  return 0;
}

}  // namespace rdmacm::rsocket
