// Copies to and from the caller's memory as the kernel's copy_to_user and
// copy_from_user do for the socket calls: an address the process cannot read
// (or write) is -EFAULT, never a crash (getsockname(2) with a bad length
// pointer, say). The copy is a system call on this process itself
// (process_vm_readv / process_vm_writev), so only the calls that name a
// length or an address through a pointer and are not on the data path use
// it. Where those calls are refused (a seccomp filter), a plain copy.
#pragma once

#include <sys/socket.h>

#include <cstddef>

namespace rdmacm::rsocket {

int copy_from_caller(void* to, const void* from, size_t n);
int copy_to_caller(void* to, const void* from, size_t n);

// As the kernel's move_addr_to_user: the room *len names (-EINVAL if
// negative as an int) takes the first bytes of addr (addr_len of them), and
// *len becomes addr_len.
int give_addr(const void* addr, socklen_t addr_len, sockaddr* to, socklen_t* len);

// A socket option's value as the kernel's getsockopt gives an int or a
// struct: a room shorter than the value takes its first bytes (-EINVAL if
// negative as an int), *len becomes what was copied.
int give_option(const void* value, socklen_t value_len, void* to, socklen_t* len);

}  // namespace rdmacm::rsocket
