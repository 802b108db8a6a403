// The RDMA devices of this host, each with its lazily opened ibv_context and
// default protection domain.
//
// Devices stay open for the life of the process, as rdma-core's do, so the
// pointers handed out by rdma_get_devices and stored in rdma_cm_id::verbs
// and ::pd remain valid after rdma_free_devices. The exception is a device
// the kernel removes (RDMA_CM_EVENT_DEVICE_REMOVAL): once no id is left on
// it, its default PD and context are closed, since the kernel's removal
// (`rdma link delete`, a hot-unplug) waits until every user of the uverbs
// device has closed it. The application must have destroyed what it made on
// that context (QPs, CQs, PDs, MRs) before it destroys the device's last id.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/mutex.h"

namespace rdmacm::core {

struct Device {
  ibv_device* dev = nullptr;
  uint64_t guid_be = 0;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;  // the default PD for ids on this device
  uint8_t max_initiator_depth = 0;
  uint8_t max_responder_resources = 0;
  uint32_t max_qp_wr = 0;  // work requests a QP of this device may hold
  std::vector<uint8_t> link_layer;  // per port, index port_num - 1
  std::atomic<bool> removed{false};  // DEVICE_REMOVAL seen: no new id binds here
  std::atomic<int> holds{0};  // DeviceHolds (core/cm.h): users that are not ids
};

class DeviceTable {
 public:
  static DeviceTable& instance();

  // Opens every device; returns their contexts (empty, with -ENODEV in *err,
  // when there is none or none could be opened).
  std::vector<ibv_context*> open_all(int* err) EXCLUDES(mutex_);

  // Lists the devices once, if not done yet: the first event channel does it,
  // as rdma-core's does, so that the first address resolution event does not
  // pay for loading the verbs providers while later events wait behind it.
  void prime() EXCLUDES(mutex_);

  // The device with this node GUID (network byte order, as the kernel reports
  // it), opened with its default PD; nullptr if unknown or unusable.
  Device* by_guid(uint64_t guid_be) EXCLUDES(mutex_);

  // The kernel reported DEVICE_REMOVAL for an id on d.
  void mark_removed(Device* d);
  // Closes the PD and context of every removed device no id and no hold is
  // on any more (called after an id is destroyed or a hold let go of; one
  // relaxed load when none was removed).
  void release_removed() EXCLUDES(mutex_);

 private:
  // Refreshes the device list (devices may be added after start-up, e.g. an
  // rxe link created after the first call).
  void refresh_locked() REQUIRES(mutex_);
  bool open_locked(Device& d) REQUIRES(mutex_);

  // The table's lock: a leaf, held across opening a device (ibv_open_device,
  // ibv_alloc_pd: the verbs provider's, which wait on nothing of ours). Also
  // what a Device's ctx, pd and attributes are written under (open_locked,
  // release_removed); ids read them without it, after by_guid handed the
  // device out, and no id is on a device when release_removed closes it.
  Mutex mutex_;
  std::vector<std::unique_ptr<Device>> devices_ GUARDED_BY(mutex_);
  // Kept alive: Device::dev points into them.
  std::vector<ibv_device**> lists_ GUARDED_BY(mutex_);
  // Released: kept for stale pointers.
  std::vector<std::unique_ptr<Device>> retired_ GUARDED_BY(mutex_);
  std::atomic<bool> any_removed_{false};
};

}  // namespace rdmacm::core
