// Stream endpoints made ahead, for a process that connects or accepts often.
//
// Over half of a connect is the two endpoints (docs/facts.md): QP, CQ and
// registrations the kernel makes and pins, about 5 ms each under TCG. When a
// process makes endpoints of one shape in a run (the third, each within
// kOften of the one before), a background thread makes the next one ahead,
// and the next connect or accept of that shape takes it instead of waiting
// for its own. A spare
// nobody takes within kKeep is destroyed, so a process whose connections
// stop coming holds nothing more than before after a second (as a closed
// socket's linger). At most config().endpoints_ahead exist at once (the
// file or RSOCKET_ENDPOINTS_AHEAD; 2 by default, 0: none); each keeps its device
// open (core::DeviceHold) until it is taken or destroyed.
//
// A child process after fork never takes its parent's spares (their verbs
// objects are the parent's).
#pragma once

#include <rdma/rdma_cma.h>

#include "rsocket/endpoint.h"

namespace rdmacm::rsocket {

// Moves a spare of this shape into *out (which must be empty); false if
// there is none.
bool take_spare(const EndpointShape& shape, Endpoint* out);

// An endpoint of this shape was just made or taken for id (the device it
// is on): the next one is made ahead if they come often.
void endpoint_made(const EndpointShape& shape, rdma_cm_id* id);

}  // namespace rdmacm::rsocket
