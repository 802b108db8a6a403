// Event channels: creation, destruction, and the application's view of
// their events (get and acknowledge).
#include <cerrno>

#include "core/cm.h"
#include "core/device_table.h"
#include "core/events.h"
#include "core/id_state.h"
#include "core/objects.h"
#include "core/transport.h"

namespace rdmacm::core {

int create_channel(rdma_event_channel** out) {
  int fd = transport().open_channel();
  if (fd < 0) return fd;
  DeviceTable::instance().prime();
  auto channel = std::make_shared<EventChannel>(fd);
  *out = &channel->pub;
  Objects::get().channels.add(*out, std::move(channel));
  return 0;
}

int destroy_channel(rdma_event_channel* channel) {
  // The fd closes when the last id still using the channel lets go of it.
  return Objects::get().channels.take(channel) ? 0 : -EINVAL;
}

int get_event(rdma_event_channel* channel, rdma_cm_event** out) {
  if (!out) return -EINVAL;
  auto ch = Objects::get().channels.find(channel);
  if (!ch) return -EINVAL;
  return next_event(*ch, out);
}

int ack_event(rdma_cm_event* event) { return release_event(event); }

}  // namespace rdmacm::core
