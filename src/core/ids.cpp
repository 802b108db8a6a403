// Identifiers: creation, destruction, addressing, options and migration.
//
// The one place where an operation reaches sideways: destroy_id's teardown
// lets go of what the id holds in the other families' files (its queued
// events, its addrinfo result, its multicast groups). None of them calls
// back into this file.

#include <cerrno>
#include <cstring>
#include <new>

#include "core/addrinfo.h"
#include "core/cm.h"
#include "core/device_table.h"
#include "core/events.h"
#include "core/id_state.h"
#include "core/ids.h"
#include "core/multicast.h"
#include "core/objects.h"
#include "core/transport.h"
#include "core/user_events.h"

namespace rdmacm::core {

int create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
              int port_space) {
  if (!out) return -EINVAL;
  int qp_type = default_qp_type(port_space);
  if (qp_type < 0) return -EINVAL;
  return create_id_typed(channel, out, context, port_space, qp_type);
}

int create_id_typed(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                    int port_space, int qp_type) {
  if (default_qp_type(port_space) < 0) return -EINVAL;

  ChannelRef ch;
  if (channel) {
    if (!(ch = Objects::listed_channel(channel))) return -EINVAL;
  } else {
    int err = 0;
    if (!(ch = private_channel(&err))) return err;
  }
  IdRef id = Objects::ids().make();
  id->sync = !channel;
  id->set_channel(std::move(ch));
  id->pub.context = context;
  id->pub.ps = static_cast<rdma_port_space>(port_space);
  id->pub.qp_type = static_cast<ibv_qp_type>(qp_type);

  if (int err = transport().create_id(id->fd(), id->uid(),
                                      static_cast<uint16_t>(port_space),
                                      static_cast<uint8_t>(qp_type), &id->handle))
    return err;
  try {
    Objects::get().publish(id);
  } catch (const std::bad_alloc&) {
    uint32_t ignored;
    transport().destroy_id(id->fd(), id->handle, &ignored);
    throw;
  }
  *out = &id->pub;
  return 0;
}

int destroy_id(rdma_cm_id* pub) {
  Objects& objs = Objects::get();
  IdRef id = Objects::listed_id(pub);
  // Claimed once: a second destroy racing the first is refused.
  if (!id || id->destroying.exchange(true)) return -EINVAL;
  ack_stored_event(*id);
  uint32_t reported = 0;
  if (int err = transport().destroy_id(id->fd(), id->handle, &reported)) {
    // The kernel still has it: the id stays valid, as with rdma-core.
    id->destroying = false;
    return err;
  }
  cancel_user_events(*id);
  forget_resolution(*id);
  // Events the kernel reported must be acknowledged by the application, or
  // dropped by a reader that took one from the kernel just before the
  // destroy: that reader must still find the id (and its groups) to count
  // it, so the tables let go of them only afterwards.
  id->tally.wait(id->reported(reported),
                 [&] { warn_unacked("rdma_destroy_id", pub, id.get()); });
  objs.detach(*id);
  forget_groups(*id);  // the kernel left them with the id
  DeviceTable::instance().release_removed();
  return 0;
}

int bind_addr(rdma_cm_id* pub, const sockaddr* addr) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  socklen_t len = addr_len(addr);
  if (!len) return -EINVAL;
  if (int err = transport().bind(id->fd(), id->handle, addr, len)) return err;
  return refresh_address(*id, Gids::always);
}

int resolve_addr(rdma_cm_id* pub, const sockaddr* src, const sockaddr* dst,
                 int timeout_ms) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  socklen_t dst_len = addr_len(dst);
  socklen_t src_len = addr_len(src);
  if (!dst_len || (src && !src_len) || timeout_ms < 0) return -EINVAL;
  if (int err = transport().resolve_addr(id->fd(), id->handle, src, src_len, dst,
                                         dst_len, static_cast<uint32_t>(timeout_ms)))
    return err;
  std::memcpy(&id->pub.route.addr.dst_storage, dst, dst_len);
  return complete(*id);
}

int resolve_route(rdma_cm_id* pub, int timeout_ms) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (!id->pub.verbs || timeout_ms < 0) return -EINVAL;  // address not resolved
  if (int err = transport().resolve_route(id->fd(), id->handle,
                                          static_cast<uint32_t>(timeout_ms)))
    return err;
  return complete(*id);
}

uint16_t src_port(rdma_cm_id* pub) {
  auto id = find_id(pub);
  return id ? port_of(&id->pub.route.addr.src_addr) : 0;
}

uint16_t dst_port(rdma_cm_id* pub) {
  auto id = find_id(pub);
  return id ? port_of(&id->pub.route.addr.dst_addr) : 0;
}

int set_option(rdma_cm_id* pub, int level, int name, const void* value, size_t len) {
  auto id = find_id(pub);
  if (!id || !len || len > UINT32_MAX) return -EINVAL;
  if (!value) return -EFAULT;  // what the kernel answers rdma-core
  return transport().set_option(id->fd(), id->handle, level, name, value, len);
}

namespace {

// Moves the id to a new channel (nullptr: a private synchronous one).
int migrate(CmId& id, const ChannelRef& to) {
  ChannelRef target = to;
  int err = 0;
  if (!target && !(target = private_channel(&err))) return err;
  uint32_t reported = 0;
  if ((err = transport().migrate_id(target->pub.fd, id.handle, id.fd(), &reported)))
    return err;
  if (id.sync) ack_stored_event(id);
  id.swap_channel(std::move(target));  // see CmId::fd(); the old channel goes after its lock
  id.sync = !to;
  if (id.sync)
    cancel_user_events(id);  // nobody reads a synchronous id's channel
  else
    move_user_events(id);
  // Events of the old channel already handed out must be acknowledged
  // before the id's events may flow on the new one.
  id.tally.wait(id.reported(reported),
                [&] { warn_unacked("rdma_migrate_id", &id.pub, &id); });
  return 0;
}

}  // namespace

int migrate_id(rdma_cm_id* pub, rdma_event_channel* channel) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  ChannelRef to;
  if (channel) {
    if (!(to = Objects::listed_channel(channel))) return -EINVAL;
  } else if (id->sync) {
    return -EINVAL;  // already synchronous
  }
  return migrate(*id, to);
}

}  // namespace rdmacm::core
