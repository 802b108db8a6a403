// Event channels: creation, destruction, and the application's view of
// their events (get and acknowledge).
#include <cerrno>

#include "core/cm.h"
#include "core/device_table.h"
#include "core/events.h"
#include "core/id_state.h"
#include "core/objects.h"

namespace rdmacm::core {

int create_channel(rdma_event_channel** out) {
  int err = 0;
  ChannelRef channel = private_channel(&err);
  if (!channel) return err;
  DeviceTable::instance().prime();
  StablePool<EventChannel>::list(*channel);
  *out = &channel->pub;
  return 0;
}

int destroy_channel(rdma_event_channel* channel) {
  // The fd closes when the last id still using the channel lets go of it.
  ChannelRef ch = Objects::listed_channel(channel);
  return ch && StablePool<EventChannel>::unlist(*ch) ? 0 : -EINVAL;
}

int get_event(rdma_event_channel* channel, rdma_cm_event** out) {
  if (!out) return -EINVAL;
  ChannelRef ch = Objects::listed_channel(channel);
  if (!ch) return -EINVAL;
  return next_event(*ch, out);
}

int ack_event(rdma_cm_event* event) { return release_event(event); }

}  // namespace rdmacm::core
