// Background threads that watch rsockets' CM channels, as rdma-core's do:
// one accepts connection requests on listeners, one follows the CM events
// of connecting and connected sockets (a non-blocking connect's progress, a
// peer's disconnect). Started on first use; a socket is removed before it
// is freed, and once remove() returns the thread no longer touches it.
#pragma once

#include <memory>

namespace rdmacm::rsocket {

class StreamSocket;

enum class Watch { listeners, connections, keepalive };

// keepalive: the socket's send_keepalive() every keepalive_interval() seconds
// (SO_KEEPALIVE). -errno if the thread could not be started.
int watch(Watch which, StreamSocket* s);
void unwatch(Watch which, StreamSocket* s);

// Takes a closed socket whose peer has not closed its end yet: waits for it
// (at most two seconds), finishes the close and deletes the socket. If that
// cannot be done (no thread), returns it: the caller finishes at once.
std::unique_ptr<StreamSocket> linger_close(std::unique_ptr<StreamSocket> s);

}  // namespace rdmacm::rsocket
