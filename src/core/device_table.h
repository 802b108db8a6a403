// The RDMA devices of this host, each with its lazily opened ibv_context.
//
// Contexts stay open for the life of the process, as rdma-core's do, so the
// pointers handed out by rdma_get_devices and stored in rdma_cm_id::verbs
// remain valid after rdma_free_devices.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace rdmacm {

class DeviceTable {
 public:
  static DeviceTable& instance();

  // Opens every device; returns their contexts (empty with errno-style code
  // in *err when there is none or none could be opened).
  std::vector<ibv_context*> open_all(int* err);

  // Context of the device with this node GUID (network byte order, as the
  // kernel reports it), opening it on first use; nullptr if unknown.
  ibv_context* by_guid(uint64_t guid_be);

 private:
  struct Device {
    ibv_device* dev = nullptr;
    uint64_t guid_be = 0;
    ibv_context* ctx = nullptr;
  };

  // Refreshes the device list (devices may be added after start-up, e.g. an
  // rxe link created after the first call). Caller holds mutex_.
  void refresh_locked();
  ibv_context* open_locked(Device& d);

  std::mutex mutex_;
  std::vector<Device> devices_;
  std::vector<ibv_device**> lists_;  // kept alive: Device::dev points into them
};

}  // namespace rdmacm
