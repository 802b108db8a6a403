// Identifiers: creation, destruction, addressing, options and migration.
#include <infiniband/ib.h>

#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "core/cm_internal.h"
#include "core/device_table.h"
#include "core/objects.h"
#include "core/transport.h"

namespace rdmacm::core {
namespace {

// The QP type an id of this port space uses by default; -1 if unknown.
int default_qp_type(int port_space) {
  switch (port_space) {
    case RDMA_PS_TCP:
    case RDMA_PS_IB:
      return IBV_QPT_RC;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB:
      return IBV_QPT_UD;
    default:
      return -1;
  }
}

uint16_t port_of(const sockaddr* sa) {
  switch (sa->sa_family) {
    case AF_INET:
      return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
    case AF_INET6:
      return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
    case AF_IB: {
      uint64_t sid = be64toh(reinterpret_cast<const sockaddr_ib*>(sa)->sib_sid);
      return htobe16(static_cast<uint16_t>(sid));
    }
    default:
      return 0;
  }
}

// A new private channel for a synchronous id.
std::shared_ptr<EventChannel> private_channel(int* err) {
  int fd = transport().open_channel();
  if (fd < 0) {
    *err = fd;
    return nullptr;
  }
  return std::make_shared<EventChannel>(fd);
}

void ack_stored_event(CmId& id) {
  if (id.pub.event) {
    ack_event(id.pub.event);
    id.pub.event = nullptr;
  }
}

}  // namespace

socklen_t addr_len(const sockaddr* addr) {
  if (!addr) return 0;
  switch (addr->sa_family) {
    case AF_INET:
      return sizeof(sockaddr_in);
    case AF_INET6:
      return sizeof(sockaddr_in6);
    case AF_IB:
      return sizeof(sockaddr_ib);
    default:
      return 0;
  }
}

std::shared_ptr<CmId> find_id(rdma_cm_id* pub) { return Objects::get().ids.find(pub); }

int complete(CmId& id) {
  if (!id.sync) return 0;
  ack_stored_event(id);
  if (int err = next_event(*id.channel, &id.pub.event)) return err;
  const rdma_cm_event& ev = *id.pub.event;
  if (!ev.status) return 0;
  if (event_type(ev.event) == RDMA_CM_EVENT_REJECTED) return -ECONNREFUSED;
  return ev.status < 0 ? ev.status : -ev.status;
}

int create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
              int port_space) {
  int qp_type = default_qp_type(port_space);
  if (qp_type < 0) return -EINVAL;
  return create_id_typed(channel, out, context, port_space, qp_type);
}

int create_id_typed(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                    int port_space, int qp_type) {
  if (default_qp_type(port_space) < 0) return -EINVAL;

  auto id = std::make_shared<CmId>();
  if (channel) {
    id->channel = Objects::get().channels.find(channel);
    if (!id->channel) return -EINVAL;
  } else {
    int err = 0;
    if (!(id->channel = private_channel(&err))) return err;
    id->sync = true;
  }
  id->pub.channel = &id->channel->pub;
  id->pub.context = context;
  id->pub.ps = static_cast<rdma_port_space>(port_space);
  id->pub.qp_type = static_cast<ibv_qp_type>(qp_type);

  if (int err = transport().create_id(id->fd(), id->uid(),
                                      static_cast<uint16_t>(port_space),
                                      static_cast<uint8_t>(qp_type), &id->handle))
    return err;
  Objects::get().publish(id);
  *out = &id->pub;
  return 0;
}

std::shared_ptr<CmId> adopt_id(const CmId& listener, uint32_t handle) {
  auto id = std::make_shared<CmId>();
  id->channel = std::atomic_load(&listener.channel);  // it may be migrating: see CmId::fd()
  id->handle = handle;
  id->pub.channel = &id->channel->pub;
  id->pub.context = listener.pub.context;
  id->pub.ps = listener.pub.ps;
  id->pub.qp_type = listener.pub.qp_type;
  Objects::get().publish(id);
  return id;
}

int destroy_id(rdma_cm_id* pub) {
  Objects& objs = Objects::get();
  auto id = objs.ids.take(pub);
  if (!id) return -EINVAL;
  id->destroying = true;
  ack_stored_event(*id);
  uint32_t reported = 0;
  if (int err = transport().destroy_id(id->fd(), id->handle, &reported)) {
    // The kernel still has it: the id stays valid, as with rdma-core.
    id->destroying = false;
    objs.ids.add(pub, id);
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
  return 0;
}

int refresh_address(CmId& id) {
  WireAddr a;
  if (int err = transport().query_addr(id.fd(), id.handle, &a)) return err;
  rdma_addr& addr = id.pub.route.addr;
  std::memcpy(&addr.src_storage, &a.src, sizeof(a.src));
  std::memcpy(&addr.dst_storage, &a.dst, sizeof(a.dst));
  if (!id.device && a.node_guid) {
    id.device = DeviceTable::instance().by_guid(a.node_guid);
    if (!id.device) return -ENODEV;
    id.pub.verbs = id.device->ctx;
    id.pub.pd = id.device->pd;
    id.pub.port_num = a.port_num;
    addr.addr.ibaddr.pkey = a.pkey;
  }
  if (!id.pub.verbs || id.pub.verbs->device->transport_type != IBV_TRANSPORT_IB)
    return 0;
  return transport().query_gid(id.fd(), id.handle, addr.addr.ibaddr.sgid.raw,
                               addr.addr.ibaddr.dgid.raw);
}

int bind_addr(rdma_cm_id* pub, const sockaddr* addr) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  socklen_t len = addr_len(addr);
  if (!len) return -EINVAL;
  if (int err = transport().bind(id->fd(), id->handle, addr, len)) return err;
  return refresh_address(*id);
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

int migrate(CmId& id, const std::shared_ptr<EventChannel>& to) {
  std::shared_ptr<EventChannel> target = to;
  int err = 0;
  if (!target && !(target = private_channel(&err))) return err;
  uint32_t reported = 0;
  if ((err = transport().migrate_id(target->pub.fd, id.handle, id.fd(), &reported)))
    return err;
  if (id.sync) ack_stored_event(id);
  std::atomic_store(&id.channel, target);  // see CmId::fd()
  id.pub.channel = &target->pub;
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

int migrate_id(rdma_cm_id* pub, rdma_event_channel* channel) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  std::shared_ptr<EventChannel> to;
  if (channel) {
    if (!(to = Objects::get().channels.find(channel))) return -EINVAL;
  } else if (id->sync) {
    return -EINVAL;  // already synchronous
  }
  return migrate(*id, to);
}

}  // namespace rdmacm::core
