#include "rsocket/caller_memory.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdmacm::rsocket {
namespace {

// Whether the system call itself was refused (not the address).
bool refused(int err) { return err == ENOSYS || err == EPERM; }

}  // namespace

int copy_from_caller(void* to, const void* from, size_t n) {
  if (!n) return 0;
  if (!from) return -EFAULT;
  iovec local{to, n}, remote{const_cast<void*>(from), n};
  ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (r == static_cast<ssize_t>(n)) return 0;
  if (r < 0 && refused(errno)) {
    std::memcpy(to, from, n);
    return 0;
  }
  return -EFAULT;
}

int copy_to_caller(void* to, const void* from, size_t n) {
  if (!n) return 0;
  if (!to) return -EFAULT;
  iovec local{const_cast<void*>(from), n}, remote{to, n};
  ssize_t r = process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
  if (r == static_cast<ssize_t>(n)) return 0;
  if (r < 0 && refused(errno)) {
    std::memcpy(to, from, n);
    return 0;
  }
  return -EFAULT;
}

int give_addr(const void* addr, socklen_t addr_len, sockaddr* to, socklen_t* len) {
  socklen_t room;
  if (!len || copy_from_caller(&room, len, sizeof(room))) return -EFAULT;
  if (static_cast<int>(room) < 0) return -EINVAL;
  if (int err = copy_to_caller(to, addr, std::min(room, addr_len))) return err;
  return copy_to_caller(len, &addr_len, sizeof(addr_len));
}

int give_option(const void* value, socklen_t value_len, void* to, socklen_t* len) {
  socklen_t room;
  if (!len || copy_from_caller(&room, len, sizeof(room))) return -EFAULT;
  if (static_cast<int>(room) < 0) return -EINVAL;
  socklen_t n = std::min(room, value_len);
  if (int err = copy_to_caller(to, value, n)) return err;
  return copy_to_caller(len, &n, sizeof(n));
}

}  // namespace rdmacm::rsocket
