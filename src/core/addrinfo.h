// What other core files use of core/addrinfo.cpp and core/addrinfo_async.cpp.
#pragma once

#include <rdma/rdma_cma.h>

#include "core/objects.h"

namespace rdmacm::core {

// rdma_getaddrinfo hints: every address length has an address, and no
// length exceeds a sockaddr_storage.
bool hint_addrs_valid(const rdma_addrinfo& hints);

// Drops what rdma_resolve_addrinfo left on a dying id.
void forget_resolution(CmId& id);

}  // namespace rdmacm::core
