// The event pump: the kernel's events turned into the application's, and the
// synchronous calls' wait for theirs. Below every operation; above the
// floors (id_state, qp_state) and the queued events (user_events).
#pragma once

#include <rdma/rdma_cma.h>

#include "core/objects.h"

namespace rdmacm::core {

// Reads the next event of this channel and hands it out (blocking unless the
// fd is non-blocking).
int next_event(EventChannel& channel, rdma_cm_event** out);

// In synchronous mode, waits for the id's next event and turns a failure
// status into the call's error, as rdma-core does; 0 otherwise.
int complete(CmId& id);

}  // namespace rdmacm::core
