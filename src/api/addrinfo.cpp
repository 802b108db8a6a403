// Address and route resolution service.
#include <rdma/rdma_cma.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_getaddrinfo(const char* node, const char* service,
                                   const rdma_addrinfo* hints, rdma_addrinfo** res) {
  int gai_error = 0;
  int r = api::call([&] { return core::getaddrinfo(node, service, hints, res, &gai_error); });
  // As rdma-core 44 does, a resolver failure returns getaddrinfo's EAI_*
  // code itself (negative, for gai_strerror), errno as the resolver left it.
  return r > 0 ? gai_error : r;
}

RDMACM_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  api::call([&] { return core::freeaddrinfo(res); });
}

RDMACM_EXPORT int rdma_resolve_addrinfo(rdma_cm_id* id, const char* node, const char* service,
                                        const rdma_addrinfo* hints) {
  return api::call([&] { return core::resolve_addrinfo(id, node, service, hints); });
}

RDMACM_EXPORT int rdma_query_addrinfo(rdma_cm_id* id, rdma_addrinfo** info) {
  return api::call([&] { return core::query_addrinfo(id, info); });
}
