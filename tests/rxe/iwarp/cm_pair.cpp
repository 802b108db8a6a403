#include "cm_pair.h"

#include <arpa/inet.h>
#include <poll.h>

#include <cstdlib>
#include <cstring>

#include "cm_print.h"

namespace iwt {

sockaddr_in device_addr(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  const char* ip = std::getenv("RXE_IP");
  inet_pton(AF_INET, ip ? ip : "127.0.0.1", &a.sin_addr);
  return a;
}

rdma_cm_event* wait_event(rdma_event_channel* ch) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return nullptr;
  rdma_cm_event* ev = nullptr;
  return rdma_get_cm_event(ch, &ev) ? nullptr : ev;
}

int take_event(const char* who, rdma_event_channel* ch, uint8_t seed, rdma_cm_id** req) {
  rdma_cm_event* ev = wait_event(ch);
  event(who, ev, seed);
  if (!ev) return -1;
  int type = ev->event;
  if (req && type == RDMA_CM_EVENT_CONNECT_REQUEST) *req = ev->id;
  rdma_ack_cm_event(ev);
  return type;
}

ibv_qp_init_attr rc_attr() {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  return a;
}

bool Pair::open(uint16_t port, rdma_port_space ps, uint16_t client_port) {
  sch = rdma_create_event_channel();
  cch = rdma_create_event_channel();
  if (!sch || !cch) {
    ret("rdma_create_event_channel", -1);
    return false;
  }
  if (rdma_create_id(sch, &listener, nullptr, ps) || rdma_create_id(cch, &client, nullptr, ps)) {
    ret("rdma_create_id", -1);
    return false;
  }
  sockaddr_in a = device_addr(port);
  if (int r = rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&a))) {
    ret("open: rdma_bind_addr", r);
    return false;
  }
  if (int r = rdma_listen(listener, 8)) {
    ret("open: rdma_listen", r);
    return false;
  }
  sockaddr_in from = device_addr(client_port);
  if (int r = rdma_resolve_addr(client, client_port ? reinterpret_cast<sockaddr*>(&from) : nullptr,
                                reinterpret_cast<sockaddr*>(&a), 2000)) {
    ret("open: rdma_resolve_addr", r);
    return false;
  }
  if (take_event("open client", cch, 0) != RDMA_CM_EVENT_ADDR_RESOLVED) return false;
  if (int r = rdma_resolve_route(client, 2000)) {
    ret("open: rdma_resolve_route", r);
    return false;
  }
  return take_event("open client", cch, 0) == RDMA_CM_EVENT_ROUTE_RESOLVED;
}

bool Pair::connect(rdma_conn_param* cparam, rdma_conn_param* aparam) {
  ibv_qp_init_attr qa = rc_attr();
  if (int r = client->qp ? 0 : rdma_create_qp(client, nullptr, &qa)) {
    ret("client rdma_create_qp", r);
    return false;
  }
  int r = rdma_connect(client, cparam);
  ret("client rdma_connect", r);
  if (r) return false;
  if (take_event("server", sch, 0x11, &server) != RDMA_CM_EVENT_CONNECT_REQUEST) return false;
  qa = rc_attr();
  if (int r2 = rdma_create_qp(server, nullptr, &qa)) {
    ret("server rdma_create_qp", r2);
    return false;
  }
  r = rdma_accept(server, aparam);
  ret("server rdma_accept", r);
  if (r) return false;
  int ce = take_event("client", cch, 0x22);
  int se = take_event("server", sch, 0x11);
  connected = ce == RDMA_CM_EVENT_ESTABLISHED && se == RDMA_CM_EVENT_ESTABLISHED;
  return connected;
}

void Pair::close(bool loud) {
  if (connected) {
    int r = rdma_disconnect(client);
    if (loud || r) ret("close: client rdma_disconnect", r);
    rdma_cm_event* ev = wait_event(sch);
    if (loud || !ev || ev->event != RDMA_CM_EVENT_DISCONNECTED) event("close: server", ev, 0);
    if (ev) rdma_ack_cm_event(ev);
    ev = wait_event(cch);
    if (loud || !ev || ev->event != RDMA_CM_EVENT_DISCONNECTED) event("close: client", ev, 0);
    if (ev) rdma_ack_cm_event(ev);
  }
  for (rdma_cm_id* id : {server, client, listener}) {
    if (!id) continue;
    if (id->qp) rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  if (sch) rdma_destroy_event_channel(sch);
  if (cch) rdma_destroy_event_channel(cch);
  *this = Pair{};
}

}  // namespace iwt
