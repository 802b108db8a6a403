// rdma_get_devices / rdma_free_devices.
#include <cerrno>
#include <cstdlib>

#include "core/cm.h"
#include "core/device_table.h"

namespace rdmacm::core {

int get_devices(ibv_context*** out, int* count) {
  int err = 0;
  std::vector<ibv_context*> ctxs = DeviceTable::instance().open_all(&err);
  if (err) return err;
  // malloc'd so that an application freeing it with free() (as some do,
  // wrongly but harmlessly with rdma-core) does not corrupt the heap.
  auto list = static_cast<ibv_context**>(
      std::calloc(ctxs.size() + 1, sizeof(ibv_context*)));
  if (!list) return -ENOMEM;
  for (size_t i = 0; i < ctxs.size(); ++i) list[i] = ctxs[i];
  *out = list;
  if (count) *count = static_cast<int>(ctxs.size());
  return 0;
}

int free_devices(ibv_context** list) {
  std::free(list);
  return 0;
}

}  // namespace rdmacm::core
