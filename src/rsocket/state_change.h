// One broadcast for "a socket's state changed behind a sleeper's back" (the
// CM service saw a disconnect; another thread took the completion that woke
// both): every thread asleep in rpoll/rselect and every repoll set looks at
// its rsockets again. One eventfd carries it: a repoll set holds it
// edge-triggered (each announcement an edge, the count never read), an rpoll
// sleeper polls it, and the last sleeper out of a round of wake-ups empties
// it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmacm::rsocket {

// The one call for whoever changed a socket's state: fd is the socket's.
// Takes only the broadcast's own lock, never held with another: callable
// under any.
void announce_state_change(int fd);

// A repoll set's hold on the broadcast: its fd (-errno if none could be
// made), to register edge-triggered; announcements ring it while held.
// *cursor: where the set starts reading which sockets changed.
int state_change_subscribe(uint64_t* cursor);
void state_change_unsubscribe();

// Which sockets changed since *cursor (appended to fds, *cursor moved on), so
// that a set looks at those and not at all of its own (4,096 connections
// accepted or closed would cost 4,096 looks each). false when the log no
// longer reaches back to *cursor (more announcements than it keeps): look
// at every socket.
constexpr size_t kStateChangeLog = 1024;
bool state_changes_since(uint64_t* cursor, std::vector<int>* fds);

// rpoll's sleepers. sleep_begin: the fd to poll beside the sockets' own, or
// -EAGAIN while a round of wake-ups is still going (re-check, then try
// again), or -errno. Then sleep_end(slept): true after the sleep (the
// others wake to re-check too), false if it gave up without sleeping.
int sleep_begin();
void sleep_end(bool slept);

}  // namespace rdmacm::rsocket
