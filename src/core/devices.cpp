// rdma_get_devices / rdma_free_devices.
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <unordered_set>

#include "core/cm.h"
#include "core/device_table.h"

namespace rdmacm::core {
namespace {

// Lists handed out and not yet freed, so that freeing a foreign or already
// freed pointer is refused instead of corrupting the heap.
std::mutex lists_mutex;
std::unordered_set<ibv_context**>& live_lists() {
  static auto* lists = new std::unordered_set<ibv_context**>;
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
  {
    std::lock_guard lock(lists_mutex);
    live_lists().insert(list);
  }
  *out = list;
  *count = static_cast<int>(ctxs.size());
  return 0;
}

int free_devices(ibv_context** list) {
  if (!list) return 0;
  {
    std::lock_guard lock(lists_mutex);
    if (!live_lists().erase(list)) return -EINVAL;
  }
  std::free(list);
  return 0;
}

}  // namespace rdmacm::core
