// The endpoint API: rdma_create_ep (an id, resolved or bound, optionally with
// a QP, from an rdma_addrinfo), rdma_get_request and rdma_destroy_ep. Endpoint
// ids are synchronous until migrated to a channel.
#include <cerrno>
#include <new>

#include "core/cm.h"
#include "core/events.h"
#include "core/id_state.h"
#include "core/ids.h"
#include "core/objects.h"

namespace rdmacm::core {
namespace {

constexpr int kResolveTimeoutMs = 2000;  // rdma-core's fixed endpoint timeout

int passive_ep(CmId& id, const rdma_addrinfo& res, ibv_pd* pd, const ibv_qp_init_attr* qp_attr) {
  if (int err = bind_addr(&id.pub, res.ai_src_addr)) return err;
  if (pd) id.pub.pd = pd;
  if (qp_attr) {
    CmIdExtras& x = id.extras();
    x.ep_qp_attr = std::make_unique<ibv_qp_init_attr>(*qp_attr);
    x.ep_qp_attr->qp_type = static_cast<ibv_qp_type>(res.ai_qp_type);
  }
  return 0;
}

int active_ep(CmId& id, const rdma_addrinfo& res, ibv_pd* pd, ibv_qp_init_attr* qp_attr) {
  if (int err = resolve_addr(&id.pub, res.ai_src_len ? res.ai_src_addr : nullptr,
                             res.ai_dst_addr, kResolveTimeoutMs))
    return err;
  int err = res.ai_route_len
                ? set_option(&id.pub, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, res.ai_route,
                             res.ai_route_len)
                : resolve_route(&id.pub, kResolveTimeoutMs);
  if (!err && res.ai_route_len) err = complete(id);
  if (err) return err;
  if (qp_attr) {
    qp_attr->qp_type = static_cast<ibv_qp_type>(res.ai_qp_type);
    if ((err = create_qp(&id.pub, pd, qp_attr))) return err;
  }
  if (res.ai_connect_len && res.ai_connect) {
    auto* data = static_cast<const uint8_t*>(res.ai_connect);
    id.extras().connect_data.assign(data, data + res.ai_connect_len);
  }
  return 0;
}

}  // namespace

int create_ep(rdma_cm_id** out, const rdma_addrinfo* res, ibv_pd* pd,
              ibv_qp_init_attr* qp_attr) {
  if (!out || !res) return -EINVAL;
  bool passive = res->ai_flags & RAI_PASSIVE;
  if (passive ? !res->ai_src_addr : !res->ai_dst_addr) return -EINVAL;
  rdma_cm_id* pub = nullptr;
  if (int err = create_id_typed(nullptr, &pub, nullptr, res->ai_port_space, res->ai_qp_type))
    return err;
  auto id = find_id(pub);
  int err;
  try {
    err = passive ? passive_ep(*id, *res, pd, qp_attr) : active_ep(*id, *res, pd, qp_attr);
  } catch (const std::bad_alloc&) {
    err = -ENOMEM;  // the id goes, like on any other failure
  }
  if (err) {
    destroy_ep(pub);
    return err;
  }
  *out = pub;
  return 0;
}

int destroy_ep(rdma_cm_id* pub) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  if (id->pub.qp) destroy_qp(pub);
  if (id->pub.srq) destroy_srq(pub);
  return destroy_id(pub);
}

int get_request(rdma_cm_id* listen_pub, rdma_cm_id** out) {
  auto listener = find_id(listen_pub);
  if (!listener || !out) return -EINVAL;
  if (!listener->sync) return -EINVAL;  // only for synchronous (endpoint) listeners
  // rdma-core waits for ever here for a request that cannot come.
  if (!listener->listening) return -EINVAL;
  ack_stored_event(*listener);
  rdma_cm_event* ev = nullptr;
  if (int err = next_event(*listener->own_channel(), &ev)) return err;
  int err = 0;
  if (ev->status)
    err = status_error(*ev);
  else if (event_type(ev->event) != RDMA_CM_EVENT_CONNECT_REQUEST)
    err = -EINVAL;
  else if (CmIdExtras* x = listener->peek_extras(); x && x->ep_qp_attr) {
    ibv_qp_init_attr attr = *x->ep_qp_attr;
    err = create_qp(ev->id, listener->pub.pd, &attr);
  }
  if (err) {
    listener->pub.event = ev;  // kept for the application to inspect
    return err;
  }
  *out = ev->id;
  ev->id->event = ev;
  return 0;
}

}  // namespace rdmacm::core
