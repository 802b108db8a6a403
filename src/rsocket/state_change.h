// One broadcast for "a socket's state changed behind a sleeper's back" (the
// CM service saw a disconnect; another thread took the completion that woke
// both): every thread asleep in rpoll/rselect and every repoll set looks at
// its rsockets again. One eventfd carries it: a repoll set holds it
// edge-triggered (each announcement an edge, the count never read), an rpoll
// sleeper polls it, and the last sleeper out of a round of wake-ups empties
// it.
#pragma once

namespace rdmacm::rsocket {

// The one call for whoever changed a socket's state. Takes only the
// broadcast's own lock, never held with another: callable under any.
void announce_state_change();

// A repoll set's hold on the broadcast: its fd (-errno if none could be
// made), to register edge-triggered; announcements ring it while held.
int state_change_subscribe();
void state_change_unsubscribe();

// rpoll's sleepers. sleep_begin: the fd to poll beside the sockets' own, or
// -EAGAIN while a round of wake-ups is still going (re-check, then try
// again), or -errno. Then sleep_end(slept): true after the sleep (the
// others wake to re-check too), false if it gave up without sleeping.
int sleep_begin();
void sleep_end(bool slept);

}  // namespace rdmacm::rsocket
