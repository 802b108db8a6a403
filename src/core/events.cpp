// The event pump: the kernel's events turned into the application's, with the
// work rdma-core does on the way (address and route queries, new ids for
// connection requests, QP transitions on connection responses), and the
// synchronous calls' wait for their event.
#include "core/events.h"

#include <cerrno>
#include <cstring>
#include <new>

#include "core/cm.h"
#include "core/device_table.h"
#include "core/event_pool.h"
#include "core/id_state.h"
#include "core/objects.h"
#include "core/qp_state.h"
#include "core/trace.h"
#include "core/transport.h"
#include "core/user_events.h"

namespace rdmacm::core {
namespace {

void copy_private_data(Event& ev, const uint8_t* data, uint8_t len,
                       const void** dst, uint8_t* dst_len) {
  *dst_len = len;
  if (!len) return;
  std::memcpy(ev.private_data, data, len);
  *dst = ev.private_data;
}

void copy_conn(Event& ev, const ucma_abi_conn_param& w) {
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

void copy_ud(Event& ev, const ucma_abi_ud_param& w) {
  rdma_ud_param& u = ev.pub.param.ud;
  copy_private_data(ev, w.private_data, w.private_data_len, &u.private_data,
                    &u.private_data_len);
  ib_uverbs_ah_attr ah = w.ah_attr;  // the converter takes no const
  ibv_copy_ah_attr_from_kern(&u.ah_attr, &ah);
  u.qp_num = w.qp_num;
  u.qkey = w.qkey;
}

// The kernel's param union: datagram or connected, as the id's QP type says.
void copy_params(Event& ev, const CmId& id, const ucma_abi_event_resp& w) {
  if (is_ud(id))
    copy_ud(ev, w.param.ud);
  else
    copy_conn(ev, w.param.conn);
}

// A connection request: the kernel made a new id; give it a C++ owner.
// Returns false (event dropped) if that fails, as rdma-core does; the new
// kernel id is destroyed then (nobody would ever accept or reject it).
bool accept_request(Event& ev, CmId& listener, const ucma_abi_event_resp& w) {
  IdRef id = adopt_id(listener, w.id);
  if (!id) return false;
  id->initiator_depth = w.param.conn.initiator_depth;
  id->responder_resources = w.param.conn.responder_resources;
  id->remote_ece = w.ece;
  int err = refresh_address(*id, Gids::always);
  if (!err) err = refresh_paths(*id);
  if (err) {
    discard_id(id);
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
bool translate_group(const ucma_abi_event_resp& w, Event& ev) {
  auto group = Objects::get().groups.find(Objects::key(w.uid));
  if (!group) return false;
  IdRef id = group->id;
  bool leaving;
  {
    LockGuard lock(id->peek_extras()->mc_mutex);  // made by the join
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
  ev.pub.status = static_cast<int32_t>(w.status);
  copy_ud(ev, w.param.ud);
  ev.pub.param.ud.private_data = group->context;  // rdma-core hands it back here
  if (w.event == RDMA_CM_EVENT_MULTICAST_JOIN) {
    group->mgid = ev.pub.param.ud.ah_attr.grh.dgid;
    group->mlid = ev.pub.param.ud.ah_attr.dlid;
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
bool translate(const ucma_abi_event_resp& w, Event& ev) {
  if (is_group_event(w.event)) return translate_group(w, ev);
  if (UserEvent::is_doorbell(w.uid)) return translate_user_event(w.uid, ev);
  Objects& objs = Objects::get();
  IdRef id = w.uid ? Objects::listed_id(Objects::key(w.uid))
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
  CmId& cm = *id;
  ev.owner = std::move(id);  // moved, not copied: two atomics fewer
  ev.pub.id = &cm.pub;
  set_event_type(ev.pub.event, w.event);
  ev.pub.status = static_cast<int32_t>(w.status);

  switch (w.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (int err = refresh_address(cm, Gids::on_ib)) {
        ev.pub.event = RDMA_CM_EVENT_ADDR_ERROR;
        ev.pub.status = err;
      }
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (int err = refresh_paths(cm)) {
        ev.pub.event = RDMA_CM_EVENT_ROUTE_ERROR;
        ev.pub.status = err;
      }
      break;
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      copy_params(ev, cm, w);
      if (!accept_request(ev, cm, w)) {
        cm.tally.done();
        return false;
      }
      break;
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      copy_conn(ev, w.param.conn);
      cm.remote_ece = w.ece;
      if (cm.pub.qp) {
        // With a QP the library completes the handshake itself.
        ev.pub.status = finish_connect(cm);
        ev.pub.event = ev.pub.status ? RDMA_CM_EVENT_CONNECT_ERROR
                                     : RDMA_CM_EVENT_ESTABLISHED;
        cm.connect_error = ev.pub.status != 0;
      }
      break;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_DISCONNECTED:
      if (cm.connect_error) {
        cm.tally.done();
        return false;
      }
      copy_conn(ev, w.param.conn);
      if (w.event == RDMA_CM_EVENT_REJECTED) modify_qp_err(cm);
      break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:  // let it go once its last id is destroyed
      if (cm.device) DeviceTable::instance().mark_removed(cm.device);
      copy_params(ev, cm, w);
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      copy_params(ev, cm, w);
      if (!is_ud(cm) && !cm.remote_ece.vendor_id) cm.remote_ece = w.ece;
      break;
    default:
      copy_params(ev, cm, w);
      break;
  }
  return true;
}

}  // namespace

int next_event(EventChannel& ch, rdma_cm_event** out) {
  // Taken before the kernel counts the event as reported, so that running
  // out of memory cannot lose a counted event.
  EventHold ev(new_event());
  for (;;) {
    ucma_abi_event_resp w;  // the transport fills it all
    if (int err = transport().get_event(ch.pub.fd, &w)) return err;
    if (translate(w, *ev)) {
      if (trace_on) trace_event(w.event, w.id, &ev->pub);
      *out = &ev->pub;
      hand_out(*ev.release());
      return 0;
    }
    if (trace_on) trace_event(w.event, w.id, nullptr);
    clear_event(*ev);
  }
}

int complete(CmId& id) {
  if (!id.sync) return 0;
  ack_stored_event(id);
  if (int err = next_event(*id.own_channel(), &id.pub.event)) return err;
  return status_error(*id.pub.event);
}

}  // namespace rdmacm::core
