#include "core/device_table.h"

#include <algorithm>
#include <cerrno>

namespace rdmacm {

DeviceTable& DeviceTable::instance() {
  // Never destroyed: contexts must outlive any id an application leaks.
  static DeviceTable* table = new DeviceTable;
  return *table;
}

void DeviceTable::refresh_locked() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return;
  bool added = false;
  for (int i = 0; i < n; ++i) {
    uint64_t guid = ibv_get_device_guid(list[i]);
    auto same = [&](const Device& d) { return d.guid_be == guid; };
    if (std::find_if(devices_.begin(), devices_.end(), same) != devices_.end())
      continue;
    devices_.push_back({list[i], guid, nullptr});
    added = true;
  }
  if (added)
    lists_.push_back(list);
  else
    ibv_free_device_list(list);
}

ibv_context* DeviceTable::open_locked(Device& d) {
  if (!d.ctx) d.ctx = ibv_open_device(d.dev);
  return d.ctx;
}

std::vector<ibv_context*> DeviceTable::open_all(int* err) {
  std::lock_guard lock(mutex_);
  refresh_locked();
  std::vector<ibv_context*> out;
  for (Device& d : devices_)
    if (ibv_context* ctx = open_locked(d)) out.push_back(ctx);
  *err = out.empty() ? -ENODEV : 0;
  return out;
}

ibv_context* DeviceTable::by_guid(uint64_t guid_be) {
  std::lock_guard lock(mutex_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (Device& d : devices_)
      if (d.guid_be == guid_be) return open_locked(d);
    refresh_locked();  // a device created after our last look
  }
  return nullptr;
}

}  // namespace rdmacm
