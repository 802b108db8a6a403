// Event channels: creation, destruction, and the application's view of
// their events (get and acknowledge).
#include <cerrno>
#include <cstdio>
#include <string>

#include "core/cm.h"
#include "core/cm_internal.h"
#include "core/device_table.h"
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
  auto ch = Objects::get().channels.find(channel);
  if (!ch) return -EINVAL;
  return next_event(*ch, out);
}

void warn_unacked(const char* call, const void* handle, const CmId* id, const Multicast* group) {
  std::string names;
  int n = 0;
  Objects::get().events.for_each([&](const rdma_cm_event*, const Event& ev) {
    if ((id && ev.owner.get() == id) || (group && ev.group.get() == group)) {
      names += n++ ? ", " : "";
      names += rdma_event_str(ev.pub.event);
    }
  });
  if (n)
    std::fprintf(stderr,
                 "librdmacm: %s(%p) has waited 5 s for %d event(s) it reported to be "
                 "acknowledged with rdma_ack_cm_event: %s; still waiting\n",
                 call, handle, n, names.c_str());
  else
    std::fprintf(stderr,
                 "librdmacm: %s(%p) has waited 5 s for events another thread has taken "
                 "from rdma_get_cm_event and not returned; still waiting\n",
                 call, handle);
}

int ack_event(rdma_cm_event* event) {
  auto ev = Objects::get().events.take(event);
  if (!ev) return -EINVAL;
  ev->owner->tally.done();
  if (ev->group) ev->group->tally.done();
  return 0;
}

}  // namespace rdmacm::core
