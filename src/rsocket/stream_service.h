// Stream sockets' background work, as rdma-core 44's service threads do it
// (one ServiceThread each: service_thread.h): accepting connection requests
// on listeners; following the CM events of connecting and connected sockets
// (a non-blocking connect's progress, a peer's disconnect), sending their
// keep-alives and shrinking their idle send rings; finishing lingering
// closes. Started on first use; a
// socket is removed before it is freed, and once unwatch returns the
// service no longer touches it.
#pragma once

#include <memory>

namespace rdmacm::rsocket {

class StreamSocket;

enum class Watch { listeners, connections, keepalive, accept_deadline, send_ring_idle };

// keepalive: the socket's send_keepalive() every keepalive_interval() seconds
// (SO_KEEPALIVE; watching again reschedules). accept_deadline: its
// accept_timed_out() once, kAcceptTimeoutMs from now (on the connection
// service's thread, as its handshake's events). send_ring_idle: its
// shrink_idle_send_ring() kSendRingIdleMs from now, and again as often while
// it asks. -errno if the thread could not be started. The services' handlers may call these.
int watch(Watch which, StreamSocket* s);
void unwatch(Watch which, StreamSocket* s);

// Takes a closed socket whose peer has not closed its end yet: looks every
// few milliseconds until it has or kLingerMs have passed, then finishes the
// close and deletes the socket. Hands it back if that cannot be done (no
// thread): it goes at once.
constexpr int kLingerMs = 2000;

// How long an accepted connection may take to finish its handshake before
// its listener drops it (a peer that never answers the kernel's REP would
// hold it for the kernel's retries, a minute or more).
constexpr int kAcceptTimeoutMs = 10000;

// How long a grown send ring must have taken no byte, and have none in
// flight, before it shrinks back to its first size (looked at this often).
constexpr int kSendRingIdleMs = 1000;
std::unique_ptr<StreamSocket> linger_close(std::unique_ptr<StreamSocket> s);

}  // namespace rdmacm::rsocket
