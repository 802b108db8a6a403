// Identifiers: creation, destruction, binding and address resolution.
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

// In synchronous mode, waits for the id's next event and turns a failure
// status into the call's error, as rdma-core does.
int complete(CmId& id) {
  if (!id.sync) return 0;
  if (id.pub.event) {
    ack_event(id.pub.event);
    id.pub.event = nullptr;
  }
  if (int err = next_event(*id.channel, &id.pub.event)) return err;
  const rdma_cm_event& ev = *id.pub.event;
  if (!ev.status) return 0;
  if (ev.event == RDMA_CM_EVENT_REJECTED) return -ECONNREFUSED;
  return ev.status < 0 ? ev.status : -ev.status;
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

int create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
              int port_space) {
  int qp_type = default_qp_type(port_space);
  if (qp_type < 0) return -EINVAL;
  Objects& objs = Objects::get();

  auto id = std::make_shared<CmId>();
  if (channel) {
    id->channel = objs.channels.find(channel);
    if (!id->channel) return -EINVAL;
  } else {
    rdma_event_channel* own = nullptr;
    if (int err = create_channel(&own)) return err;
    id->channel = objs.channels.find(own);
    id->sync = true;
  }
  id->pub.channel = &id->channel->pub;
  id->pub.context = context;
  id->pub.ps = static_cast<rdma_port_space>(port_space);
  id->pub.qp_type = static_cast<ibv_qp_type>(qp_type);

  int err = transport().create_id(id->channel->pub.fd, id->uid(),
                                  static_cast<uint16_t>(port_space),
                                  static_cast<uint8_t>(qp_type), &id->handle);
  if (err) {
    if (id->sync) objs.channels.take(id->pub.channel);
    return err;
  }
  objs.attached.add(reinterpret_cast<const void*>(id->uid()), id);
  *out = &id->pub;
  objs.ids.add(*out, std::move(id));
  return 0;
}

int destroy_id(rdma_cm_id* pub) {
  Objects& objs = Objects::get();
  auto id = objs.ids.take(pub);
  if (!id) return -EINVAL;
  id->destroying = true;
  if (id->sync && id->pub.event) {
    ack_event(id->pub.event);
    id->pub.event = nullptr;
  }
  uint32_t reported = 0;
  int err = transport().destroy_id(id->channel->pub.fd, id->handle, &reported);
  objs.attached.take(reinterpret_cast<const void*>(id->uid()));
  if (err) return err;
  // Events already handed to the application must be acknowledged first.
  id->wait_events_done(reported);
  if (id->sync) objs.channels.take(id->pub.channel);
  return 0;
}

int refresh_address(CmId& id) {
  WireAddr a;
  int fd = id.channel->pub.fd;
  if (int err = transport().query_addr(fd, id.handle, &a)) return err;
  rdma_addr& addr = id.pub.route.addr;
  std::memcpy(&addr.src_storage, &a.src, sizeof(a.src));
  std::memcpy(&addr.dst_storage, &a.dst, sizeof(a.dst));
  if (!id.pub.verbs && a.node_guid) {
    id.pub.verbs = DeviceTable::instance().by_guid(a.node_guid);
    if (!id.pub.verbs) return -ENODEV;
    id.pub.port_num = a.port_num;
    addr.addr.ibaddr.pkey = a.pkey;
  }
  if (!id.pub.verbs) return 0;  // bound to an address that has no device yet
  return transport().query_gid(fd, id.handle, addr.addr.ibaddr.sgid.raw,
                               addr.addr.ibaddr.dgid.raw);
}

int bind_addr(rdma_cm_id* pub, const sockaddr* addr) {
  auto id = Objects::get().ids.find(pub);
  if (!id) return -EINVAL;
  socklen_t len = addr_len(addr);
  if (!len) return -EINVAL;
  if (int err = transport().bind(id->channel->pub.fd, id->handle, addr, len))
    return err;
  return refresh_address(*id);
}

int resolve_addr(rdma_cm_id* pub, const sockaddr* src, const sockaddr* dst,
                 int timeout_ms) {
  auto id = Objects::get().ids.find(pub);
  if (!id) return -EINVAL;
  socklen_t dst_len = addr_len(dst);
  socklen_t src_len = addr_len(src);
  if (!dst_len || (src && !src_len)) return -EINVAL;
  if (int err = transport().resolve_addr(id->channel->pub.fd, id->handle, src,
                                         src_len, dst, dst_len,
                                         static_cast<uint32_t>(timeout_ms)))
    return err;
  std::memcpy(&id->pub.route.addr.dst_storage, dst, dst_len);
  return complete(*id);
}

uint16_t src_port(rdma_cm_id* pub) {
  auto id = Objects::get().ids.find(pub);
  return id ? port_of(&id->pub.route.addr.src_addr) : 0;
}

uint16_t dst_port(rdma_cm_id* pub) {
  auto id = Objects::get().ids.find(pub);
  return id ? port_of(&id->pub.route.addr.dst_addr) : 0;
}

}  // namespace rdmacm::core
