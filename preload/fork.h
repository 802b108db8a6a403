// RDMAV_FORK_SAFE=1: an RDMA connection cannot pass from a parent to a forked
// child, so the connection is made over TCP and moved onto an rsocket at its
// first use, in whichever process uses it (rdma-core's scheme, wire-compatible
// with its preload): the passive side listens on an rsocket at the same port,
// sends a 4-byte zero over TCP and accepts; the active side peeks that zero
// and connects. The TCP connection is then shut down; its socket stays as the
// placeholder.
//
// Where rdma-core 44 trusts the peer, ours does not (DESIGN.md, "A peer is
// not trusted"): every wait on the peer has a deadline (fork_peer.h), after
// which the connection stays on TCP; the passive side announces nothing to a
// peer that has already sent data or closed (it talks TCP); it takes only an
// RDMA connection from its TCP peer's address that the TCP peer then confirms
// by closing the TCP connection (what a genuine mover, ours or rdma-core's,
// does right after its rconnect returns, and what no other process can do
// for it), refusing any other and waiting on; and a move holds no lock but
// its own socket's while it waits.
#pragma once

#include "fd_map.h"

namespace rspreload {

// Moves a fork-pending connection onto an rsocket when it is one that can
// move (accepted or connected); returns the entry's kind afterwards
// (Kind::kernel when the move failed: the connection stays on TCP). Another
// thread's call on the same socket meanwhile waits for the move; calls on
// other sockets do not.
Kind settle_fork(int fd, Entry* e);

}  // namespace rspreload
