// The TCP side of a fork-mode move (fork.h): what the peer says on the TCP
// connection while the two ends move it onto RDMA, each wait bounded. Kernel
// sockets only, so the unit tests run it over loopback TCP.
#pragma once

#include <sys/socket.h>

#include "deadline.h"

namespace rspreload {

// How long a move waits on its peer. A peer that does not play its part
// within these costs the other end that long, then the connection stays on
// TCP (rdma-core 44 waits for ever at each of these points).
//   kPeerWaitMs: the passive side, from its announcement (the 4-byte zero),
//     for an RDMA connection that proves to come from its TCP peer.
//   kIdentityWaitMs: the passive side, for the TCP peer's close that follows
//     a genuine peer's rconnect (a candidate that does not bring it within
//     this is refused, and the wait goes on within kPeerWaitMs).
//   kSemaphoreWaitMs: the passive side, for the host-wide "/rsocket_fork"
//     semaphore (one move's listener at a time, as in rdma-core). A holder
//     of ours keeps it for one move, at most kPeerWaitMs; one that died or
//     stalls holding it (or an rdma-core 44 process, which waits for ever) is
//     waited for this long, then the move goes on without it (rlisten refuses
//     a port that is really taken) and posts it after, so that a dead
//     holder's count comes back.
//   kAnnouncementWaitMs: the active side, for the announcement: the passive
//     side's semaphore wait and then some for its program's first call.
//   kConnectWaitMs: the active side's rconnect, longer than the passive
//     side's wait from its announcement (whose listener's close then refuses
//     it at once), so that the active side never walks away from a
//     connection the passive side may still take.
constexpr int kPeerWaitMs = 3000;
constexpr int kIdentityWaitMs = 1000;
constexpr int kSemaphoreWaitMs = kPeerWaitMs;
constexpr int kAnnouncementWaitMs = 2 * kSemaphoreWaitMs;
constexpr int kConnectWaitMs = 2 * kPeerWaitMs;

// What the TCP peer has done, seen without consuming a byte.
enum class TcpPeer {
  quiet,   // nothing to read, still open
  zero,    // the passive side's announcement: 4 bytes of zero, first in the stream
  data,    // bytes that are not (or cannot become) the announcement
  closed,  // end of stream or an error, nothing before it
};

// The active side: the peer's state now (never waits; `fd` may be blocking
// or not). A partial announcement (1-3 zero bytes, the stream still open)
// is `quiet`.
TcpPeer tcp_peer_now(int fd);

// The active side's wait for the announcement: the first state other than
// `quiet` before `d`, else `quiet`.
TcpPeer await_announcement(int fd, const Deadline& d);

// The passive side, to which a mover sends nothing over TCP: any byte is
// `data` (the peer talks TCP), else `closed` or `quiet`. Never waits.
TcpPeer tcp_peer_bytes(int fd);

// The passive side's wait for the TCP peer to close without a byte: the
// first state other than `quiet` (tcp_peer_bytes) before `d`, else `quiet`.
TcpPeer await_close(int fd, const Deadline& d);

// Whether two socket addresses name the same host (IPv4 and its IPv4-mapped
// IPv6 form alike; ports and scope ignored).
bool same_host(const sockaddr* a, socklen_t alen, const sockaddr* b, socklen_t blen);

// An IPv4-mapped IPv6 address (a dual-stack socket's view of an IPv4 peer)
// rewritten as the IPv4 address it is, port kept; any other left alone.
void unmap_v4(sockaddr_storage* a, socklen_t* len);

}  // namespace rspreload
