// Datagram rsockets' address resolutions: a claim (a DsUdpHeader from a
// peer's address naming its QPN) under the binding rule (datagram_dests.h),
// and the resolution of a new peer's address and route that it starts, on
// the socket's own event channel, which the UDP service watches beside the
// UDP socket: the service thread never waits on a peer (rdma-core 44
// resolves on that thread, synchronously, up to 2 s for the address and 2 s
// for the route, and every datagram rsocket's first contact waits behind
// it). At most kMaxResolving per socket run at once; each ends within the
// kernel's timeouts (ADDR_ERROR, ROUTE_ERROR), or when the socket goes.
#include <cerrno>
#include <cstring>

#include "core/cm.h"
#include "rsocket/datagram.h"

namespace rdmacm::rsocket {
namespace {

constexpr int kResolveTimeoutMs = 2000;  // each of address and route, as rdma-core 44

}  // namespace

void DatagramSocket::claim(Dest* dest, uint32_t qpn) {
  PeerBinding::Claim c = PeerBinding::Claim::none;
  settle(dest, [&] { c = dest->binding.on_claim(qpn); });
  if (c != PeerBinding::Claim::resolve) return;
  if (dest->resolving) {
    dest->resolving_qpn = qpn;  // unbound yet: the latest claim's
    return;
  }
  start_resolve(dest, qpn);
}

// Past the bound nothing starts: the destination stays unbound (sends over
// UDP) until a later claim finds room or a UD message from its host binds it.
void DatagramSocket::start_resolve(Dest* dest, uint32_t qpn) {
  if (resolving_ >= kMaxResolving || !resolver_) return;
  rdma_cm_id* local = dest->qp->id;
  rdma_cm_id* id = nullptr;
  if (core::create_id(resolver_, &id, dest, RDMA_PS_UDP)) return;
  Addr src{};
  const sockaddr* ours = rdma_get_local_addr(local);
  std::memcpy(&src, ours, sockaddr_len(ours->sa_family));
  src.sin.sin_port = 0;  // same offset in sockaddr_in6
  if (core::resolve_addr(id, &src.sa, &dest->addr.sa, kResolveTimeoutMs)) {
    core::destroy_id(id);  // no route: nothing to resolve
    return;
  }
  dest->resolving = id;
  dest->resolving_qpn = qpn;
  ++resolving_;
}

// The service thread, on the channel's events (non-blocking: it takes what
// is there). Each event is acknowledged at once, so that destroying its id
// (here, or when the socket goes) never waits.
void DatagramSocket::process_resolutions() {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (core::get_event(resolver_, &ev)) return;
    rdma_cm_id* id = ev->id;
    uint32_t type = core::event_type(ev->event);
    core::ack_event(ev);
    // A resolving destination is never evicted: the context is alive.
    auto* dest = static_cast<Dest*>(id->context);
    LockGuard send(send_mutex_);
    if (!dest || dest->resolving != id) continue;
    if (type == RDMA_CM_EVENT_ADDR_RESOLVED && !core::resolve_route(id, kResolveTimeoutMs))
      continue;
    ibv_ah* ah = type == RDMA_CM_EVENT_ROUTE_RESOLVED ? route_ah(dest->qp->id, id, dest->addr)
                                                      : nullptr;
    end_resolve(dest, ah);
  }
}

// Without an AH sends keep going over UDP; each claim retries.
void DatagramSocket::end_resolve(Dest* dest, ibv_ah* ah) {
  core::destroy_id(dest->resolving);
  dest->resolving = nullptr;
  --resolving_;
  if (!ah) return;
  if (dest->ah || dest->self) {  // learnt meanwhile from a UD message, or our own
    ibv_destroy_ah(ah);
    return;
  }
  set_ah(dest, ah, dest->resolving_qpn);
}

}  // namespace rdmacm::rsocket
