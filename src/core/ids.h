// What other operations use of core/ids.cpp.
#pragma once

#include <rdma/rdma_cma.h>

namespace rdmacm::core {

// rdma_create_id with a QP type other than the port space's default (as an
// rdma_addrinfo may ask for).
int create_id_typed(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                    int port_space, int qp_type);

}  // namespace rdmacm::core
