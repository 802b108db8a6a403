// Datagram rsockets' QPs and address handles: one UD QP per local address a
// socket sends from (its CQ, buffers and posted receives, and an address
// handle to itself), and an address handle per destination, resolved as
// rdma-core 44 resolves it or learnt from a message the peer sent.
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

constexpr int kResolveTimeoutMs = 2000;

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
  auto self = std::make_unique<Dest>();
  self->addr = src;
  self->qp = q;
  self->qpn = id->qp->qp_num;
  ibv_port_attr port;
  if ((err = ibv_query_port(id->verbs, id->port_num, &port))) return fail(-err);
  ibv_ah_attr ah{};
  ah.port_num = id->port_num;
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    ibv_gid gid = gid_of(&src.sa);
    if ((err = roce_grh(id, port, gid, gid, 1, &ah))) return fail(err);
  } else {
    ah.dlid = port.lid;
  }
  self->ah = ibv_create_ah(id->pd, &ah);
  if (!self->ah) return fail(errno ? -errno : -ENOMEM);

  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = q;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, id->recv_cq_channel->fd, &ev)) {
    ibv_destroy_ah(self->ah);
    return fail(-errno);
  }
  for (uint32_t i = 0; i < sizes_.rq_size; ++i) {
    if ((err = post_recv(q, i * wire::kDsSlotSize))) {
      ibv_destroy_ah(self->ah);
      return fail(err);
    }
  }
  q->self = self.get();
  dests_[src] = std::move(self);
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

// The service thread: an address handle to the peer's QP qpn, from a route
// resolved as rdma-core 44 resolves it (a throwaway id, our address to theirs).
void DatagramSocket::resolve_ah(Dest* dest, uint32_t qpn) {
  rdma_cm_id* local = dest->qp->id;
  rdma_cm_id* id = nullptr;
  if (core::create_id(nullptr, &id, nullptr, RDMA_PS_UDP)) return;
  Addr src{};
  std::memcpy(&src, rdma_get_local_addr(local),
              rdma_get_local_addr(local)->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                                 : sizeof(sockaddr_in));
  src.sin.sin_port = 0;  // same offset in sockaddr_in6
  ibv_ah_attr attr{};
  ibv_port_attr port;
  bool ok = !core::resolve_addr(id, &src.sa, &dest->addr.sa, kResolveTimeoutMs) &&
            !core::resolve_route(id, kResolveTimeoutMs) &&
            !ibv_query_port(local->verbs, local->port_num, &port);
  const ibv_sa_path_rec* path = ok && id->route.num_paths ? id->route.path_rec : nullptr;
  if (ok && port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    ibv_gid dgid = path ? path->dgid : gid_of(&dest->addr.sa);
    ibv_gid sgid = path ? path->sgid : gid_of(&src.sa);
    ok = !roce_grh(local, port, dgid, sgid, path ? path->hop_limit : 0, &attr);
    if (ok && path) {
      attr.grh.flow_label = be32toh(path->flow_label);
      attr.grh.traffic_class = path->traffic_class;
      attr.sl = path->sl;
    }
  } else if (ok && path) {
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
    ok = false;
  }
  attr.port_num = local->port_num;
  ibv_ah* ah = ok ? ibv_create_ah(local->pd, &attr) : nullptr;
  core::destroy_id(id);
  LockGuard lock(send_mutex_);
  set_ah(dest, ah, qpn);  // none: sends keep going over UDP, each answer retries
}

void DatagramSocket::set_ah(Dest* dest, ibv_ah* ah, uint32_t qpn) {
  if (dest->ah) ibv_destroy_ah(dest->ah);
  if (!dest->ah != !ah) dests_without_ah_ += ah ? -1 : 1;
  dest->ah = ah;
  dest->qpn = qpn;
}

// A message from a destination we have no AH for yet (our first message to
// it went over UDP; the service has not heard back): an AH from the
// message's own completion and GRH, as the peer is plainly reachable. Saves
// sending more over UDP, which the peer's service forwards after messages
// that came over UD: out of order.
void DatagramSocket::learn_ah(const Addr& from, Qp* qp, const ibv_wc& wc, const ibv_grh& grh) {
  Addr key;
  std::memcpy(&key, &from, sizeof(key));
  LockGuard send(send_mutex_);
  Dest* dest = nullptr;
  {
    LockGuard map(map_mutex_);
    auto it = dests_.find(key);
    if (it == dests_.end()) return;
    dest = it->second.get();
  }
  // Not from our own QP: the service's forwards name the peer as the source.
  if (dest->ah || dest->qp != qp || wc.src_qp == qp->id->qp->qp_num) return;
  ibv_ah_attr attr{};
  if (ibv_init_ah_from_wc(qp->id->verbs, qp->id->port_num, const_cast<ibv_wc*>(&wc),
                          const_cast<ibv_grh*>(&grh), &attr))
    return;
  if (ibv_ah* ah = ibv_create_ah(qp->id->pd, &attr)) set_ah(dest, ah, wc.src_qp);
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
