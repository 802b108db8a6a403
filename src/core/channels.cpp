// Event channels: creation, event retrieval and acknowledgement.
#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "core/cm_internal.h"
#include "core/objects.h"
#include "core/transport.h"

namespace rdmacm::core {

int create_channel(rdma_event_channel** out) {
  int fd = transport().open_channel();
  if (fd < 0) return fd;
  auto channel = std::make_shared<EventChannel>(fd);
  *out = &channel->pub;
  Objects::get().channels.add(*out, std::move(channel));
  return 0;
}

int destroy_channel(rdma_event_channel* channel) {
  // The fd closes when the last id still using the channel lets go of it.
  return Objects::get().channels.take(channel) ? 0 : -EINVAL;
}

namespace {

// Fills the public event from the kernel's. Returns false when the event is
// for an id the application can no longer see (being destroyed).
bool translate(const WireEvent& w, Event& ev) {
  auto id = Objects::get().attached.find(reinterpret_cast<const void*>(w.uid));
  if (!id) return false;
  if (id->destroying) {
    id->event_done();  // reported by the kernel, but nobody will ack it
    return false;
  }
  ev.id = id;
  ev.pub.id = &id->pub;
  ev.pub.event = static_cast<rdma_cm_event_type>(w.event);
  ev.pub.status = w.status;
  if (w.conn.private_data_len) {
    std::memcpy(ev.private_data, w.conn.private_data, w.conn.private_data_len);
    ev.pub.param.conn.private_data = ev.private_data;
    ev.pub.param.conn.private_data_len = w.conn.private_data_len;
  }
  if (ev.pub.event == RDMA_CM_EVENT_ADDR_RESOLVED) {
    if (int err = refresh_address(*id)) {
      ev.pub.event = RDMA_CM_EVENT_ADDR_ERROR;
      ev.pub.status = err;
    }
  }
  return true;
}

}  // namespace

int get_event(rdma_event_channel* channel, rdma_cm_event** out) {
  auto ch = Objects::get().channels.find(channel);
  if (!ch) return -EINVAL;
  return next_event(*ch, out);
}

int next_event(EventChannel& ch, rdma_cm_event** out) {
  for (;;) {
    WireEvent w;
    if (int err = transport().get_event(ch.pub.fd, &w)) return err;
    auto ev = std::make_shared<Event>();
    if (!translate(w, *ev)) continue;
    *out = &ev->pub;
    Objects::get().events.add(*out, std::move(ev));
    return 0;
  }
}

int ack_event(rdma_cm_event* event) {
  auto ev = Objects::get().events.take(event);
  if (!ev) return -EINVAL;
  ev->id->event_done();
  return 0;
}

}  // namespace rdmacm::core
