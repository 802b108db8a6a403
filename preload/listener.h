// A stream listener answers kernel TCP as well as RDMA. RoCE has no loopback
// (a client of 127.0.0.1, ::1 or 0.0.0.0 reaches the server over kernel TCP:
// the preload falls back to it), and a client without the preload speaks
// TCP: each must find the server listening, as it would without the
// preload. So at listen() the placeholder, a kernel TCP socket of the same
// domain, binds to the address and port the rsocket got and listens too,
// best effort (a port taken in TCP's space leaves the listener on RDMA only,
// said on RDMACM_TRACE). accept() takes from whichever side has a
// connection, alternating when both have; poll, select and epoll watch both.
// An RDMA client still reaches the rsocket: the RDMA CM answers its request
// before any TCP is tried, so the data of a preloaded client that can reach
// the listener over RDMA goes over RDMA.
//
// Across fork() the kernel listener is shared, as the kernel's always is; the
// rsocket is not (RDMA resources stay with the process that made them). In a
// child the listener becomes its kernel side alone, so every process that
// holds it accepts: the children over TCP, the parent (while it keeps its
// copy) over RDMA too. The child never closes the parent's rsocket.
#pragma once

#include <sys/socket.h>

#include "fd_map.h"

namespace rspreload {

// After rlisten() on `e`'s rsocket succeeded: its placeholder `fd` listens
// on the rsocket's address and port as well (again: a new backlog).
void listen_on_kernel_too(int fd, Entry* e, int backlog);

// accept()/accept4() on rsocket listener `fd` (`flags` already checked): an
// RDMA connection as a new placeholder mapped to its rsocket, or a kernel
// TCP connection as the ordinary kernel socket it is. Blocking, it waits for
// either; non-blocking, EAGAIN only when neither side has one.
int accept_listener(int fd, Entry* e, sockaddr* addr, socklen_t* len, int flags);

}  // namespace rspreload
