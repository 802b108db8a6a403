// rdma_get_devices / rdma_free_devices.
#include <cerrno>
#include <cstdlib>

#include "core/cm.h"
#include "core/device_table.h"
#include "core/registry.h"

namespace rdmacm::core {
namespace {

PointerSet<ibv_context*>& live_lists() {
  static auto* lists = new PointerSet<ibv_context*>;
  return *lists;
}

}  // namespace

int get_devices(ibv_context*** out, int* count) {
  int err = 0;
  std::vector<ibv_context*> ctxs = DeviceTable::instance().open_all(&err);
  if (err) return err;
  auto list = static_cast<ibv_context**>(
      std::calloc(ctxs.size() + 1, sizeof(ibv_context*)));
  if (!list) return -ENOMEM;
  for (size_t i = 0; i < ctxs.size(); ++i) list[i] = ctxs[i];
  live_lists().add(list);
  *out = list;
  *count = static_cast<int>(ctxs.size());
  return 0;
}

int free_devices(ibv_context** list) {
  if (!list) return 0;
  if (!live_lists().take(list)) return -EINVAL;
  std::free(list);
  return 0;
}

}  // namespace rdmacm::core
