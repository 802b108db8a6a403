#include "core/id_state.h"

#include <infiniband/ib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "core/cm.h"
#include "core/device_table.h"
#include "core/event_pool.h"
#include "core/objects.h"
#include "core/transport.h"

namespace rdmacm::core {

IdRef find_id(rdma_cm_id* pub) {
  IdRef id = Objects::listed_id(pub);
  if (id && id->destroying) id.reset();
  return id;  // not "cond ? id : nullptr": that copies it (two more atomics)
}

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

ChannelRef private_channel(int* err) {
  ChannelRef ch = Objects::channels().make();  // throws std::bad_alloc: nothing opened yet
  int fd = transport().open_channel();
  if (fd < 0) {
    *err = fd;
    return nullptr;  // ch goes back with no fd (-1)
  }
  ch->pub.fd = fd;
  return ch;
}

int refresh_address(CmId& id, Gids gids) {
  ucma_abi_query_addr_resp a{};
  if (int err = transport().query_addr(id.fd(), id.handle, &a)) return err;
  rdma_addr& addr = id.pub.route.addr;
  static_assert(sizeof(addr.src_storage) == sizeof(a.src_addr));
  std::memcpy(&addr.src_storage, &a.src_addr, sizeof(a.src_addr));
  std::memcpy(&addr.dst_storage, &a.dst_addr, sizeof(a.dst_addr));
  if (!id.device && a.node_guid) {
    id.device = DeviceTable::instance().by_guid(a.node_guid);
    if (!id.device) return -ENODEV;
    id.pub.verbs = id.device->ctx;
    id.pub.pd = id.device->pd;
    id.pub.port_num = a.port_num;
    addr.addr.ibaddr.pkey = a.pkey;
  }
  if (gids == Gids::never) return 0;
  if (gids == Gids::on_ib &&
      (!id.pub.verbs || id.pub.verbs->device->transport_type != IBV_TRANSPORT_IB))
    return 0;
  return transport().query_gid(id.fd(), id.handle, addr.addr.ibaddr.sgid.raw,
                               addr.addr.ibaddr.dgid.raw);
}

int refresh_paths(CmId& id) {
  if (!id.pub.verbs || id.pub.verbs->device->transport_type != IBV_TRANSPORT_IB) return 0;
  ibv_path_data data[6];  // both directions' primary and alternate paths, and more
  size_t n = sizeof(data) / sizeof(data[0]);
  if (int err = transport().query_path(id.fd(), id.handle, data, &n)) return err;
  rdma_route& route = id.pub.route;
  if (static_cast<size_t>(route.num_paths) != n) {
    // Owned through the public pointer, as in rdma-core (~CmId frees it).
    ibv_sa_path_rec* fresh = n ? new ibv_sa_path_rec[n] : nullptr;  // may throw: nothing changed
    delete[] route.path_rec;
    route.path_rec = fresh;
    route.num_paths = static_cast<int>(n);
  }
  for (size_t i = 0; i < n; ++i) {
    const ibv_path_record& p = data[i].path;
    ibv_sa_path_rec& r = route.path_rec[i];
    r = {};
    r.dgid = p.dgid;
    r.sgid = p.sgid;
    r.dlid = p.dlid;
    r.slid = p.slid;
    uint32_t fl_hop = be32toh(p.flowlabel_hoplimit);
    r.flow_label = htobe32(fl_hop >> 8);
    r.hop_limit = static_cast<uint8_t>(fl_hop);
    r.traffic_class = p.tclass;
    r.reversible = p.reversible_numpath >> 7;
    r.numb_path = 1;
    r.pkey = p.pkey;
    r.sl = be16toh(p.qosclass_sl) & 0xF;
    r.mtu_selector = 2;  // exactly
    r.mtu = p.mtu & 0x1F;
    r.rate_selector = 2;
    r.rate = p.rate & 0x1F;
    r.packet_life_time_selector = 2;
    r.packet_life_time = p.packetlifetime & 0x1F;
    r.preference = static_cast<uint8_t>(data[i].flags);
  }
  return 0;
}

namespace {

// Moves a new kernel id onto a private channel of its own (a synchronous
// listener's request); false if there is none to be had.
bool go_private(CmId& id, int* fd) {
  int err = 0;
  auto own = private_channel(&err);
  uint32_t reported = 0;
  if (!own || transport().migrate_id(own->pub.fd, id.handle, *fd, &reported)) return false;
  *fd = own->pub.fd;
  id.set_channel(std::move(own));
  id.sync = true;
  return true;
}

}  // namespace

IdRef adopt_id(const CmId& listener, uint32_t handle) {
  int fd = listener.fd();  // it may be migrating: see CmId::fd()
  try {
    IdRef id = Objects::ids().make();
    id->handle = handle;
    id->set_channel(listener.channel_ref());
    if (!listener.sync || go_private(*id, &fd)) {
      id->pub.context = listener.pub.context;
      id->pub.ps = listener.pub.ps;
      id->pub.qp_type = listener.pub.qp_type;
      Objects::get().publish(id, true);
      return id;
    }
  } catch (const std::bad_alloc&) {
  }
  // Nobody will accept or reject it: the kernel would keep it for ever.
  uint32_t ignored;
  transport().destroy_id(fd, handle, &ignored);
  return nullptr;
}

void discard_id(const IdRef& id) {
  id->destroying = true;
  uint32_t ignored;
  transport().destroy_id(id->fd(), id->handle, &ignored);
  Objects::get().detach(*id);
}

int status_error(const rdma_cm_event& ev) {
  if (!ev.status) return 0;
  if (event_type(ev.event) == RDMA_CM_EVENT_REJECTED) return -ECONNREFUSED;
  return ev.status < 0 ? ev.status : -ev.status;
}

int release_event(rdma_cm_event* event) {
  Event* ev = claim_event(event);
  if (!ev) return -EINVAL;
  ev->owner->tally.done();
  if (ev->group) ev->group->tally.done();
  recycle_event(*ev);
  return 0;
}

void ack_stored_event(CmId& id) {
  if (id.pub.event) {
    release_event(id.pub.event);
    id.pub.event = nullptr;
  }
}

void warn_unacked(const char* call, const void* handle, const CmId* id, const Multicast* group) {
  std::string names;
  int n = 0;
  for_each_handed_out([&](const Event& ev) {
    if ((id && ev.owner.get() == id) || (group && ev.group.get() == group)) {
      names += n++ ? ", " : "";
      names += event_name(event_type(ev.pub.event));
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

}  // namespace rdmacm::core
