// rdma_get_devices / rdma_free_devices.
#include <cerrno>
#include <cstdlib>

#include "core/cm.h"
#include "core/device_table.h"
#include "core/id_state.h"
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

uint32_t max_qp_wr(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (id && id->device) return id->device->max_qp_wr;
  // No device yet: the smallest of all, as rdma-core answers.
  int err = 0;
  uint32_t smallest = 0;
  for (ibv_context* ctx : DeviceTable::instance().open_all(&err)) {
    ibv_device_attr attr;
    if (ibv_query_device(ctx, &attr) || attr.max_qp_wr <= 0) continue;
    uint32_t n = static_cast<uint32_t>(attr.max_qp_wr);
    if (!smallest || n < smallest) smallest = n;
  }
  return smallest;
}

DeviceHold::DeviceHold(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id || !id->device) return;
  Device* d = id->device;
  // Counted first, then checked: release_removed, which runs after removed
  // is set, then sees the count, or this hold backs off unused.
  d->holds.fetch_add(1);
  if (d->removed.load()) {
    d->holds.fetch_sub(1);
    DeviceTable::instance().release_removed();
    return;
  }
  device_ = d;
}

DeviceHold& DeviceHold::operator=(DeviceHold&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = o.device_;
    o.device_ = nullptr;
  }
  return *this;
}

void DeviceHold::reset() {
  if (!device_) return;
  device_->holds.fetch_sub(1);
  device_ = nullptr;
  DeviceTable::instance().release_removed();
}

}  // namespace rdmacm::core
