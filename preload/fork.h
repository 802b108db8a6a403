// RDMAV_FORK_SAFE=1: an RDMA connection cannot pass from a parent to a forked
// child, so the connection is made over TCP and moved onto an rsocket at its
// first use, in whichever process uses it (rdma-core's scheme, wire-compatible
// with its preload): the passive side listens on an rsocket at the same port,
// sends a 4-byte zero over TCP and accepts; the active side peeks that zero
// and connects. The TCP connection is then shut down; its socket stays as the
// placeholder.
#pragma once

#include "fd_map.h"

namespace rspreload {

// Moves a fork-pending connection onto an rsocket when it is one that can
// move (accepted or connected); returns the entry's kind afterwards
// (Kind::kernel when the move failed: the connection stays on TCP).
Kind settle_fork(int fd, Entry* e);

}  // namespace rspreload
