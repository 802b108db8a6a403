// Datagram rsockets' QPs and address handles: one UD QP per local address a
// socket sends from (its CQ, buffers and posted receives, and an address
// handle to itself), and an address handle per destination, from a route
// resolved as rdma-core 44 resolves it (datagram_resolve.cpp) or learnt from
// a message the peer sent from its own host; a UD message is also what
// settles a destination's binding (the rule: datagram_dests.h).
//
// Address handles: on IB ports as rdma-core 44's (a LID from the path); on RoCE
// ports always with a GRH (dgid from the path or the address, the sgid_index
// of our address's GID, RoCE v2 preferred), which rdma-core 44's lack.
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/cm.h"
#include "rsocket/buffers.h"
#include "rsocket/datagram.h"
#include "rsocket/queue_pair.h"

namespace rdmacm::rsocket {
namespace {

// The RoCE GID of an IP address: IPv4-mapped, or the IPv6 address itself.
ibv_gid gid_of(const sockaddr* sa) {
  ibv_gid gid{};
  if (sa->sa_family == AF_INET) {
    gid.raw[10] = gid.raw[11] = 0xff;
    std::memcpy(&gid.raw[12], &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else {
    std::memcpy(gid.raw, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  }
  return gid;
}

// Where gid sits in the port's GID table (RoCE v2 entries first: the one
// type every RoCE device, Soft-RoCE included, speaks); -1 if nowhere.
int gid_index(ibv_context* ctx, uint8_t port, const ibv_gid& gid, int table_len) {
  int any = -1;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry e;
    if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &e, 0)) continue;
    if (std::memcmp(&e.gid, &gid, sizeof(gid))) continue;
    if (e.gid_type == IBV_GID_TYPE_ROCE_V2) return i;
    if (any < 0) any = i;
  }
  return any;
}

// A GRH towards dgid from the GID of our address on a RoCE port.
int roce_grh(rdma_cm_id* local, const ibv_port_attr& port, const ibv_gid& dgid,
             const ibv_gid& sgid, uint8_t hop_limit, ibv_ah_attr* attr) {
  int index = gid_index(local->verbs, local->port_num, sgid, port.gid_tbl_len);
  if (index < 0) index = gid_index(local->verbs, local->port_num, gid_of(rdma_get_local_addr(local)),
                                   port.gid_tbl_len);
  if (index < 0) return -EADDRNOTAVAIL;
  attr->is_global = 1;
  attr->grh.dgid = dgid;
  attr->grh.sgid_index = static_cast<uint8_t>(index);
  attr->grh.hop_limit = hop_limit ? hop_limit : 64;
  return 0;
}

// A port's MTU in bytes (IBV_MTU_256 ... IBV_MTU_4096); 0 if it names none.
uint32_t mtu_bytes(ibv_mtu mtu) {
  return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

}  // namespace

// A UD QP bound to src (our address and the UDP socket's port), its CQ,
// buffers, posted receives, and an address handle to itself.
int DatagramSocket::create_qp(const Addr& src, Qp** out) {
  auto qp = std::make_unique<Qp>();
  Qp* q = qp.get();
  int err = core::create_id(nullptr, &q->id, q, RDMA_PS_UDP);
  if (err) return err;
  auto fail = [&](int e) {
    free_qp(qp.release());
    return e;
  };
  q->hdr = encode_header(src);
  if ((err = core::bind_addr(q->id, &src.sa))) return fail(err);
  rdma_cm_id* id = q->id;
  if (!id->verbs || !id->pd) return fail(-ENODEV);  // no RDMA device has this address
  size_t rbuf_len = sizes_.rbuf_size + sizes_.rq_size * sizeof(ibv_grh);
  q->rbuf = static_cast<uint8_t*>(forksafe_alloc(rbuf_len));
  if (!q->rbuf) return fail(-ENOMEM);
  q->smr = ibv_reg_mr(id->pd, sbuf_, sizes_.sbuf_size, IBV_ACCESS_LOCAL_WRITE);
  q->rmr = ibv_reg_mr(id->pd, q->rbuf, rbuf_len, IBV_ACCESS_LOCAL_WRITE);
  if (!q->smr || !q->rmr) return fail(-errno);
  Sizes granted = sizes_;
  if ((err = create_queue_pair(id, {IBV_QPT_UD, 1, 2, true, q}, &granted))) return fail(err);
  q->cq_armed = true;  // armed by create_queue_pair
  q->max_inline = granted.sq_inline;

  // Ourselves: where the service forwards a first message to.
  ibv_port_attr port;
  if ((err = ibv_query_port(id->verbs, id->port_num, &port))) return fail(-err);
  q->roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (uint32_t mtu = mtu_bytes(port.active_mtu); mtu && mtu < q->max_msg) q->max_msg = mtu;
  ibv_ah_attr ah{};
  ah.port_num = id->port_num;
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    ibv_gid gid = gid_of(&src.sa);
    if ((err = roce_grh(id, port, gid, gid, 1, &ah))) return fail(err);
  } else {
    ah.dlid = port.lid;
  }
  ibv_ah* self_ah = ibv_create_ah(id->pd, &ah);
  if (!self_ah) return fail(errno ? -errno : -ENOMEM);

  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = q;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, id->recv_cq_channel->fd, &ev)) {
    ibv_destroy_ah(self_ah);
    return fail(-errno);
  }
  for (uint32_t i = 0; i < sizes_.rq_size; ++i) {
    if ((err = post_recv(q, i * wire::kDsSlotSize))) {
      ibv_destroy_ah(self_ah);
      return fail(err);
    }
  }
  // A peer's destination at our own address becomes ours (never so far: a
  // QP is made before any destination it sends to).
  Dest* peer = dests_.find(src);
  bool counted = peer && !peer->self && peer->over_udp();
  Dest* self = dests_.add_self(src, q);  // a resolution still running ends unused
  if (self->ah) ibv_destroy_ah(self->ah);
  self->ah = self_ah;
  self->binding.bind(id->qp->qp_num);
  if (counted) --dests_unsettled_;
  q->self = self;
  {
    LockGuard lock(cq_mutex_);
    qps_.push_back(std::move(qp));
  }
  *out = q;
  return 0;
}

// Under map_mutex_.
int DatagramSocket::get_qp(const Addr& src, Qp** out) {
  for (auto& qp : qps_) {
    if (qp->self && !std::memcmp(&qp->self->addr, &src, sizeof(src))) {
      *out = qp.get();
      return 0;
    }
  }
  return create_qp(src, out);
}

// The QP's own address handle is its self Dest's (freed with dests_).
void DatagramSocket::free_qp(Qp* qp) {
  if (qp->smr) ibv_dereg_mr(qp->smr);
  if (qp->rmr) ibv_dereg_mr(qp->rmr);
  if (rdma_cm_id* id = qp->id) {
    if (id->recv_cq_channel) epoll_ctl(epfd_, EPOLL_CTL_DEL, id->recv_cq_channel->fd, nullptr);
    destroy_queue_pair(id, 0);  // every event is acknowledged as it is taken
    core::destroy_id(id);
  }
  std::free(qp->rbuf);
  delete qp;
}

// An address handle towards dst from a route resolved (resolved: an id
// whose ROUTE_RESOLVED came) as rdma-core 44 resolves it; on RoCE always
// with a GRH. Null if none can be made.
ibv_ah* DatagramSocket::route_ah(rdma_cm_id* local, rdma_cm_id* resolved, const Addr& dst) {
  ibv_ah_attr attr{};
  ibv_port_attr port;
  if (ibv_query_port(local->verbs, local->port_num, &port)) return nullptr;
  const ibv_sa_path_rec* path = resolved->route.num_paths ? resolved->route.path_rec : nullptr;
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    Addr src{};
    const sockaddr* ours = rdma_get_local_addr(local);
    std::memcpy(&src, ours, sockaddr_len(ours->sa_family));
    ibv_gid dgid = path ? path->dgid : gid_of(&dst.sa);
    ibv_gid sgid = path ? path->sgid : gid_of(&src.sa);
    if (roce_grh(local, port, dgid, sgid, path ? path->hop_limit : 0, &attr)) return nullptr;
    if (path) {
      attr.grh.flow_label = be32toh(path->flow_label);
      attr.grh.traffic_class = path->traffic_class;
      attr.sl = path->sl;
    }
  } else if (path) {
    if (path->hop_limit > 1) {
      attr.is_global = 1;
      attr.grh.dgid = path->dgid;
      attr.grh.flow_label = be32toh(path->flow_label);
      int index = gid_index(local->verbs, local->port_num, path->sgid, port.gid_tbl_len);
      attr.grh.sgid_index = static_cast<uint8_t>(index < 0 ? 0 : index);
      attr.grh.hop_limit = path->hop_limit;
      attr.grh.traffic_class = path->traffic_class;
    }
    attr.dlid = be16toh(path->dlid);
    attr.sl = path->sl;
    attr.src_path_bits = static_cast<uint8_t>(be16toh(path->slid) & ((1u << port.lmc) - 1));
    attr.static_rate = path->rate;
  } else {
    return nullptr;
  }
  attr.port_num = local->port_num;
  return ibv_create_ah(local->pd, &attr);
}

void DatagramSocket::set_ah(Dest* dest, ibv_ah* ah, uint32_t qpn) {
  settle(dest, [&] {
    if (dest->ah) ibv_destroy_ah(dest->ah);
    dest->ah = ah;
    if (ah) dest->binding.bind(qpn);
  });
}

// A message naming from as its source, from the peer's QP wc.src_qp. Its
// sender is from's host when the GRH's source GID (what ibv_init_ah_from_wc
// makes the AH's dgid: for RoCE v2 over IPv4, the IPv4 header's source) is
// from's own GID; only RoCE tells (an IB GRH names no IP address), so on IB
// nothing is learnt and a candidate stays unsettled (its sends over UDP).
// A destination with no AH learns one from the message itself: the peer is
// plainly reachable, and it saves sending more over UDP, which the peer's
// service forwards after messages that came over UD: out of order.
void DatagramSocket::heard_from(const Addr& from, Qp* qp, const ibv_wc& wc, const ibv_grh& grh) {
  uint32_t src_qp = wc.src_qp & 0xFFFFFF;
  // Not from our own QP: the service's forwards name the peer as the source.
  if (src_qp == qp->id->qp->qp_num || !qp->roce || !(wc.wc_flags & IBV_WC_GRH)) return;
  ibv_ah_attr attr{};
  if (ibv_init_ah_from_wc(qp->id->verbs, qp->id->port_num, const_cast<ibv_wc*>(&wc),
                          const_cast<ibv_grh*>(&grh), &attr))
    return;
  ibv_gid gid = gid_of(&from.sa);
  bool from_host = attr.is_global && !std::memcmp(&attr.grh.dgid, &gid, sizeof(gid));
  LockGuard send(send_mutex_);
  Dest* dest = nullptr;
  {
    LockGuard map(map_mutex_);
    dest = dests_.find(from);  // never made here: only a claim or a send makes one
  }
  if (!dest || dest->self || dest->qp != qp) return;
  PeerBinding::Heard heard;
  settle(dest, [&] { heard = dest->binding.on_heard(src_qp, from_host); });
  if (heard == PeerBinding::Heard::learn) {
    if (ibv_ah* ah = ibv_create_ah(qp->id->pd, &attr)) set_ah(dest, ah, src_qp);
  }
}

int DatagramSocket::post_recv(Qp* qp, uint32_t offset) {
  ibv_sge sge[2] = {
      {reinterpret_cast<uintptr_t>(grh_of(qp, offset)), sizeof(ibv_grh),
       qp->rmr->lkey},
      {reinterpret_cast<uintptr_t>(qp->rbuf + offset), wire::kDsSlotSize, qp->rmr->lkey},
  };
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = kRecvFlag | offset;
  wr.sg_list = sge;
  wr.num_sge = 2;
  int err = ibv_post_recv(qp->id->qp, &wr, &bad);
  return err > 0 ? -err : err;
}

}  // namespace rdmacm::rsocket
