// Device enumeration.
#include <rdma/rdma_cma.h>

#include "api/entry.h"
#include "core/cm.h"

using namespace rdmacm;

RDMACM_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  ibv_context** list = nullptr;
  int count = 0;
  int r = api::call([&] { return core::get_devices(&list, &count); });
  if (num_devices) *num_devices = r ? 0 : count;
  return r ? nullptr : list;
}

RDMACM_EXPORT void rdma_free_devices(ibv_context** list) {
  api::call([&] { return core::free_devices(list); });
}
