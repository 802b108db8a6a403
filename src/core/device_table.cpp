#include "core/device_table.h"

#include <algorithm>
#include <cerrno>

#include "core/objects.h"

namespace rdmacm::core {

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
    // A removed device's GUID may come back (an rxe link added again): that
    // is a new device, not the one whose context we still hold.
    auto same = [&](const auto& d) { return d->guid_be == guid && !d->removed; };
    if (std::find_if(devices_.begin(), devices_.end(), same) != devices_.end())
      continue;
    auto d = std::make_unique<Device>();
    d->dev = list[i];
    d->guid_be = guid;
    devices_.push_back(std::move(d));
    added = true;
  }
  if (added)
    lists_.push_back(list);
  else
    ibv_free_device_list(list);
}

bool DeviceTable::open_locked(Device& d) {
  if (d.pd) return true;
  if (!d.ctx) d.ctx = ibv_open_device(d.dev);
  if (!d.ctx) return false;
  ibv_device_attr attr;
  if (ibv_query_device(d.ctx, &attr)) return false;
  d.max_initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom);
  d.max_responder_resources = static_cast<uint8_t>(attr.max_qp_rd_atom);
  d.max_qp_wr = attr.max_qp_wr > 0 ? static_cast<uint32_t>(attr.max_qp_wr) : 0;
  d.link_layer.assign(attr.phys_port_cnt, IBV_LINK_LAYER_UNSPECIFIED);
  for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
    ibv_port_attr pa;
    if (!ibv_query_port(d.ctx, port, &pa)) d.link_layer[port - 1] = pa.link_layer;
  }
  d.pd = ibv_alloc_pd(d.ctx);
  return d.pd != nullptr;
}

std::vector<ibv_context*> DeviceTable::open_all(int* err) {
  LockGuard lock(mutex_);
  refresh_locked();
  std::vector<ibv_context*> out;
  for (auto& d : devices_)
    if (open_locked(*d)) out.push_back(d->ctx);
  *err = out.empty() ? -ENODEV : 0;
  return out;
}

void DeviceTable::prime() {
  LockGuard lock(mutex_);
  if (devices_.empty()) refresh_locked();
}

Device* DeviceTable::by_guid(uint64_t guid_be) {
  LockGuard lock(mutex_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto& d : devices_)
      if (d->guid_be == guid_be && !d->removed) return open_locked(*d) ? d.get() : nullptr;
    refresh_locked();  // a device created after our last look
  }
  return nullptr;
}

void DeviceTable::mark_removed(Device* d) {
  d->removed = true;
  any_removed_ = true;
}

void DeviceTable::release_removed() {
  if (!any_removed_.load(std::memory_order_relaxed)) return;
  std::vector<Device*> idle;
  {
    LockGuard lock(mutex_);
    for (auto& d : devices_)
      if (d->removed && !d->holds.load()) idle.push_back(d.get());
  }
  if (idle.empty()) return;
  // Leaf locks: the ids' table is read without ours held. No id can bind to
  // a removed device meanwhile (by_guid skips it).
  Objects::ids().for_each([&](const CmId& id) {
    for (auto& d : idle)
      if (d == id.device) d = nullptr;
  });
  LockGuard lock(mutex_);
  for (Device* d : idle) {
    if (!d || d->holds.load()) continue;  // held meanwhile: its last hold comes back here
    auto it = std::find_if(devices_.begin(), devices_.end(),
                           [&](const auto& p) { return p.get() == d; });
    if (it == devices_.end()) continue;  // another destroy released it first
    if (d->pd) ibv_dealloc_pd(d->pd);
    if (d->ctx) ibv_close_device(d->ctx);
    d->pd = nullptr;
    d->ctx = nullptr;
    retired_.push_back(std::move(*it));
    devices_.erase(it);
  }
}

}  // namespace rdmacm::core
