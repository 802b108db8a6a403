// Address and route resolution service.
#include <rdma/rdma_cma.h>

#include "api/entry.h"

using namespace rdmacm;

RDMACM_EXPORT int rdma_getaddrinfo(const char*, const char*, const rdma_addrinfo*, rdma_addrinfo** res) {
  if (res) *res = nullptr;
  return api::not_implemented();
}
RDMACM_EXPORT void rdma_freeaddrinfo(rdma_addrinfo*) {}
RDMACM_EXPORT int rdma_resolve_addrinfo(rdma_cm_id*, const char*, const char*, const rdma_addrinfo*) {
  return api::not_implemented();
}
RDMACM_EXPORT int rdma_query_addrinfo(rdma_cm_id*, rdma_addrinfo** info) {
  if (info) *info = nullptr;
  return api::not_implemented();
}
