// Turning the kernel's events into the application's, with the work
// rdma-core does on the way: address and route queries, new ids for
// connection requests, QP transitions on connection responses.
#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "core/cm_internal.h"
#include "core/objects.h"
#include "core/transport.h"

namespace rdmacm::core {
namespace {

bool is_ud(const CmId& id) { return id.pub.qp_type == IBV_QPT_UD; }

void copy_private_data(Event& ev, const uint8_t* data, uint8_t len,
                       const void** dst, uint8_t* dst_len) {
  *dst_len = len;
  if (!len) return;
  std::memcpy(ev.private_data, data, len);
  *dst = ev.private_data;
}

void copy_conn(Event& ev, const WireConnParam& w) {
  rdma_conn_param& c = ev.pub.param.conn;
  copy_private_data(ev, w.private_data, w.private_data_len, &c.private_data,
                    &c.private_data_len);
  c.responder_resources = w.responder_resources;
  c.initiator_depth = w.initiator_depth;
  c.flow_control = w.flow_control;
  c.retry_count = w.retry_count;
  c.rnr_retry_count = w.rnr_retry_count;
  c.srq = w.srq;
  c.qp_num = w.qp_num;
}

void copy_ud(Event& ev, const WireUdParam& w) {
  rdma_ud_param& u = ev.pub.param.ud;
  copy_private_data(ev, w.private_data, w.private_data_len, &u.private_data,
                    &u.private_data_len);
  u.ah_attr = w.ah_attr;
  u.qp_num = w.qp_num;
  u.qkey = w.qkey;
}

void copy_params(Event& ev, const CmId& id, const WireEvent& w) {
  if (is_ud(id))
    copy_ud(ev, w.ud);
  else
    copy_conn(ev, w.conn);
}

bool transport_is_ib(const CmId& id) {
  return id.pub.verbs && id.pub.verbs->device->transport_type == IBV_TRANSPORT_IB;
}

// A connection request: the kernel made a new id; give it a C++ owner.
// Returns false (event dropped) if that fails, as rdma-core does.
bool accept_request(Event& ev, CmId& listener, const WireEvent& w) {
  std::shared_ptr<CmId> id = adopt_id(listener, w.id);
  if (!id) {
    uint32_t ignored;
    transport().destroy_id(listener.fd(), w.id, &ignored);
    return false;
  }
  id->initiator_depth = w.conn.initiator_depth;
  id->responder_resources = w.conn.responder_resources;
  id->remote_ece = w.ece;
  int err = listener.sync ? migrate(*id, nullptr) : 0;
  if (!err) err = refresh_address(*id);
  if (!err) err = refresh_paths(*id);
  if (err) {
    destroy_id(&id->pub);
    return false;
  }
  ev.pub.id = &id->pub;
  ev.pub.listen_id = &listener.pub;
  return true;
}

bool is_group_event(uint32_t event) {
  return event == RDMA_CM_EVENT_MULTICAST_JOIN || event == RDMA_CM_EVENT_MULTICAST_ERROR;
}

// A multicast event: reported against the group (uid) and its id. On a join
// the library attaches the id's QP, unless the group is send-only.
bool translate_group(const WireEvent& w, Event& ev) {
  auto group = Objects::get().groups.find(Objects::key(w.uid));
  if (!group) return false;
  std::shared_ptr<CmId> id = group->id;
  bool leaving;
  {
    std::lock_guard lock(id->mc_mutex);
    leaving = group->leaving;
  }
  if (id->destroying || leaving) {
    id->tally.done();
    group->tally.done();
    return false;
  }
  ev.owner = id;
  ev.group = group;
  ev.pub.id = &id->pub;
  set_event_type(ev.pub.event, w.event);
  ev.pub.status = w.status;
  copy_ud(ev, w.ud);
  ev.pub.param.ud.private_data = group->context;  // rdma-core hands it back here
  if (w.event == RDMA_CM_EVENT_MULTICAST_JOIN) {
    group->mgid = w.ud.ah_attr.grh.dgid;
    group->mlid = w.ud.ah_attr.dlid;
    if (id->pub.qp && group->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
      if (int err = ibv_attach_mcast(id->pub.qp, &group->mgid, group->mlid)) {
        // rdma-core reports -1 here with the reason in errno (measured on
        // rxe: a group's 57th QP gives status -1, errno ENOMEM), not -errno.
        ev.pub.event = RDMA_CM_EVENT_MULTICAST_ERROR;
        ev.pub.status = -1;
        errno = err > 0 ? err : -err;
      }
    }
  }
  return true;
}

// Fills the public event from the kernel's (or, for a doorbell, from the
// event queued behind it). Returns false when the event is not for the
// application (unknown or dying id, or consumed here); the kernel still
// counted it, so its id's tally is settled here.
bool translate(const WireEvent& w, Event& ev) {
  if (is_group_event(w.event)) return translate_group(w, ev);
  bool doorbell = false;
  bool queued = translate_user_event(w.uid, ev, &doorbell);
  if (doorbell) return queued;
  Objects& objs = Objects::get();
  std::shared_ptr<CmId> id = w.uid ? objs.attached.find(Objects::key(w.uid))
                                   : objs.handles.find(Objects::handle_key(w.id));
  if (!id) return false;
  // Before accept() the kernel knows a new id by handle only; of its events
  // only ESTABLISHED matters then (rdma-core's rule for uid 0).
  if (id->destroying || (!w.uid && w.event != RDMA_CM_EVENT_ESTABLISHED)) {
    if (w.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      // The kernel made a new id for the request; nobody will accept it.
      uint32_t ignored;
      transport().destroy_id(id->fd(), w.id, &ignored);
    }
    id->tally.done();
    return false;
  }
  ev.owner = id;
  ev.pub.id = &id->pub;
  set_event_type(ev.pub.event, w.event);
  ev.pub.status = w.status;

  switch (w.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (int err = refresh_address(*id)) {
        ev.pub.event = RDMA_CM_EVENT_ADDR_ERROR;
        ev.pub.status = err;
      }
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (int err = refresh_paths(*id)) {
        ev.pub.event = RDMA_CM_EVENT_ROUTE_ERROR;
        ev.pub.status = err;
      }
      break;
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      copy_params(ev, *id, w);
      if (!accept_request(ev, *id, w)) {
        id->tally.done();
        return false;
      }
      break;
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      copy_conn(ev, w.conn);
      id->remote_ece = w.ece;
      if (id->pub.qp) {
        // With a QP the library completes the handshake itself.
        ev.pub.status = finish_connect(*id);
        ev.pub.event = ev.pub.status ? RDMA_CM_EVENT_CONNECT_ERROR
                                     : RDMA_CM_EVENT_ESTABLISHED;
        id->connect_error = ev.pub.status != 0;
      }
      break;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_DISCONNECTED:
      if (id->connect_error) {
        id->tally.done();
        return false;
      }
      copy_conn(ev, w.conn);
      if (w.event == RDMA_CM_EVENT_REJECTED) modify_qp_err(*id);
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      copy_params(ev, *id, w);
      if (!is_ud(*id) && !id->remote_ece.vendor_id) id->remote_ece = w.ece;
      break;
    default:
      copy_params(ev, *id, w);
      break;
  }
  return true;
}

}  // namespace

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

int refresh_paths(CmId& id) {
  if (!transport_is_ib(id)) return 0;
  std::vector<ibv_path_data> data;
  if (int err = transport().query_path(id.fd(), id.handle, &data)) return err;
  id.paths.resize(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    const ibv_path_record& p = data[i].path;
    ibv_sa_path_rec& r = id.paths[i];
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
  id.pub.route.path_rec = id.paths.empty() ? nullptr : id.paths.data();
  id.pub.route.num_paths = static_cast<int>(id.paths.size());
  return 0;
}

}  // namespace rdmacm::core
