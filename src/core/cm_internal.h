// Helpers shared between the core's translation units.
#pragma once

#include <rdma/rdma_cma.h>

#include "core/objects.h"

namespace rdmacm::core {

// Reads the next event of this channel and hands it out (blocking unless the
// fd is non-blocking).
int next_event(EventChannel& channel, rdma_cm_event** out);

// Re-reads the id's addresses, device, port and GIDs from the kernel.
int refresh_address(CmId& id);

}  // namespace rdmacm::core
