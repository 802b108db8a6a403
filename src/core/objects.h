// The C++ owners of the public handles, and the process-wide tables of them.
#pragma once

#include <rdma/rdma_cma.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/registry.h"

namespace rdmacm {

// An rdma_event_channel: one kernel fd on which the events of its ids arrive.
class EventChannel {
 public:
  explicit EventChannel(int fd) { pub.fd = fd; }
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  rdma_event_channel pub{};
};

// An rdma_cm_id and what the library tracks about it.
class CmId {
 public:
  rdma_cm_id pub{};
  uint32_t handle = 0;                    // the kernel's id
  std::shared_ptr<EventChannel> channel;  // keeps the fd open while we live
  bool sync = false;                      // created without a channel
  std::atomic<bool> destroying{false};

  uint64_t uid() const { return reinterpret_cast<uintptr_t>(&pub); }

  // Events handed to the application and not yet acknowledged are counted so
  // that destroy can wait for them, as rdma-core's documentation requires.
  void event_done();
  void wait_events_done(uint32_t reported);

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  uint32_t done_ = 0;
};

// An rdma_cm_event handed to the application; owns its private data copy.
class Event {
 public:
  rdma_cm_event pub{};
  std::shared_ptr<CmId> id;
  uint8_t private_data[256] = {};
};

// Process-wide tables. Never destroyed, so that handles an application leaks
// at exit are still safe to use from its atexit handlers.
struct Objects {
  Registry<rdma_event_channel, EventChannel> channels;
  Registry<rdma_cm_id, CmId> ids;       // visible to the application
  Registry<void, CmId> attached;        // by uid: ids the kernel knows about
  Registry<rdma_cm_event, Event> events;

  static Objects& get();
};

}  // namespace rdmacm
