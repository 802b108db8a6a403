// The RDMA devices of this host, each with its lazily opened ibv_context and
// default protection domain.
//
// Devices stay open for the life of the process, as rdma-core's do, so the
// pointers handed out by rdma_get_devices and stored in rdma_cm_id::verbs
// and ::pd remain valid after rdma_free_devices.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

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
};

class DeviceTable {
 public:
  static DeviceTable& instance();

  // Opens every device; returns their contexts (empty, with -ENODEV in *err,
  // when there is none or none could be opened).
  std::vector<ibv_context*> open_all(int* err);

  // Lists the devices once, if not done yet: the first event channel does it,
  // as rdma-core's does, so that the first address resolution event does not
  // pay for loading the verbs providers while later events wait behind it.
  void prime();

  // The device with this node GUID (network byte order, as the kernel reports
  // it), opened with its default PD; nullptr if unknown or unusable.
  Device* by_guid(uint64_t guid_be);

 private:
  // Refreshes the device list (devices may be added after start-up, e.g. an
  // rxe link created after the first call). Caller holds mutex_.
  void refresh_locked();
  bool open_locked(Device& d);

  std::mutex mutex_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<ibv_device**> lists_;  // kept alive: Device::dev points into them
};

}  // namespace rdmacm::core
