// The CM on iWARP, step by step: what each call returns and each event
// carries, the ids' route fields, the QPs' states and rdma_init_qp_attr's
// answers, printed one fact a line (cm_print.h). `run.py cmtable`
// (../runner/cmtable.py) runs it on our library and with rdma-core's
// preloaded, on Soft-iWARP, and diffs the two.
//
// The differences from IB/RoCE this walks through (measured on Soft-iWARP,
// the same on both libraries once the GIDs were fixed): the kernel's iw_cm
// owns the QP past INIT, so rdma_init_qp_attr gives INIT and RTR access
// flags only, RTS the port alone (mask 0x20), SQD, SQE, ERR and RESET EINVAL
// once the id has an iw_cm id (a bound or resolved id answers every state
// with access 0); the active side gets ESTABLISHED with no CONNECT_RESPONSE,
// and rdma_establish is EINVAL there; private data has no CM header and
// arrives at the length sent (request up to 196 bytes here, reply up to 199;
// a request of 255 bytes never reaches the listener, a reply of 254 or 255
// is EINVAL); a rejection reports status -ECONNRESET with the rejecter's
// private data (255 bytes: CONNECT_ERROR -EINVAL); read depths are what MPA
// negotiated, each side seeing the other's; the GIDs come from the MAC
// address, read on bound and requested ids whatever the transport; no UD,
// no multicast; an id's port is a TCP port (a TCP socket holding the
// client's makes rdma_connect EADDRINUSE). siw's ibv_query_qp reports no
// state (always RESET): the QP lines compare the read depths it does report.
//
//   cm_table BASE_PORT     (RXE_IP: the iWARP device's IPv4 address)
#include <dlfcn.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "cm_pair.h"
#include "cm_print.h"

namespace iwt {
namespace {

uint16_t next_port;

// Starts a case: its name, and the listener port it uses.
uint16_t begin(const char* name) {
  case_port = next_port++;
  std::printf("case %s\n", name);
  std::fflush(stdout);
  return case_port;
}

rdma_conn_param param(uint8_t resp_res, uint8_t init_depth, const uint8_t* pdata = nullptr,
                      uint8_t len = 0) {
  rdma_conn_param p{};
  p.responder_resources = resp_res;
  p.initiator_depth = init_depth;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  p.private_data = pdata;
  p.private_data_len = len;
  return p;
}

// Every step of one connection: ids, QPs and rdma_init_qp_attr's answers.
void stages() {
  uint16_t port = begin("stages");
  Pair p;
  p.sch = rdma_create_event_channel();
  p.cch = rdma_create_event_channel();
  ret("rdma_create_id listener", rdma_create_id(p.sch, &p.listener, nullptr, RDMA_PS_TCP));
  id("created listener", p.listener);
  init_attrs("created listener", p.listener);
  sockaddr_in a = device_addr(port);
  ret("rdma_bind_addr", rdma_bind_addr(p.listener, reinterpret_cast<sockaddr*>(&a)));
  id("bound listener", p.listener);
  init_attrs("bound listener", p.listener);
  ret("rdma_listen", rdma_listen(p.listener, 4));
  id("listening listener", p.listener);
  init_attrs("listening listener", p.listener);

  ret("rdma_create_id client", rdma_create_id(p.cch, &p.client, nullptr, RDMA_PS_TCP));
  ret("rdma_resolve_addr", rdma_resolve_addr(p.client, nullptr, reinterpret_cast<sockaddr*>(&a), 2000));
  take_event("client", p.cch, 0);
  id("addr-resolved client", p.client);
  init_attrs("addr-resolved client", p.client);
  ret("rdma_resolve_route", rdma_resolve_route(p.client, 2000));
  take_event("client", p.cch, 0);
  id("route-resolved client", p.client);
  init_attrs("route-resolved client", p.client);
  ibv_qp_init_attr qa = rc_attr();
  ret("client rdma_create_qp", rdma_create_qp(p.client, nullptr, &qa));
  qp("new client", p.client->qp);

  ret("client rdma_connect", rdma_connect(p.client, nullptr));
  init_attrs("connecting client", p.client);
  if (take_event("server", p.sch, 0, &p.server) != RDMA_CM_EVENT_CONNECT_REQUEST) return p.close();
  id("requested server", p.server);
  init_attrs("requested server", p.server);
  qa = rc_attr();
  ret("server rdma_create_qp", rdma_create_qp(p.server, nullptr, &qa));
  qp("new server", p.server->qp);
  ret("server rdma_accept", rdma_accept(p.server, nullptr));
  int ce = take_event("client", p.cch, 0);
  int se = take_event("server", p.sch, 0);
  p.connected = ce == RDMA_CM_EVENT_ESTABLISHED && se == RDMA_CM_EVENT_ESTABLISHED;
  id("established client", p.client);
  qp("established client", p.client->qp);
  init_attrs("established client", p.client);
  id("established server", p.server);
  qp("established server", p.server->qp);
  init_attrs("established server", p.server);
  if (!p.connected) return p.close();

  ret("client rdma_disconnect", rdma_disconnect(p.client));
  take_event("server", p.sch, 0);
  take_event("client", p.cch, 0);
  qp("disconnected client", p.client->qp);
  qp("disconnected server", p.server->qp);
  init_attrs("disconnected client", p.client);
  init_attrs("disconnected server", p.server);
  // The peer already closed: the server's own disconnect, then another.
  ret("server rdma_disconnect", rdma_disconnect(p.server));
  qp("server after its disconnect", p.server->qp);
  ret("client rdma_disconnect again", rdma_disconnect(p.client));
  p.connected = false;
  p.close();
}

// Private data in the request and the reply, at lengths about IB's limits.
void private_data() {
  static const uint8_t lens[] = {0, 1, 56, 57, 92, 196, 255};
  for (uint8_t len : lens) {
    char name[48];
    std::snprintf(name, sizeof name, "private_data %u", len);
    begin(name);
    Pair p;
    if (p.open(case_port)) {
      uint8_t out[255], back[255];
      fill(out, len, 0x11);
      fill(back, 255 - len, 0x22);
      rdma_conn_param c = param(RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH, out, len);
      rdma_conn_param s = param(RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH, back,
                                static_cast<uint8_t>(255 - len));
      p.connect(&c, &s);
    }
    p.close();
  }
}

// Rejections with private data, and rdma_reject_ece.
void rejections() {
  static const uint8_t lens[] = {0, 1, 56, 148, 255};
  for (int ece = 0; ece < 2; ++ece) {
    for (uint8_t len : lens) {
      if (ece && len != 56) continue;
      char name[48];
      std::snprintf(name, sizeof name, "reject%s %u", ece ? "_ece" : "", len);
      begin(name);
      Pair p;
      if (p.open(case_port)) {
        ibv_qp_init_attr qa = rc_attr();
        ret("client rdma_create_qp", rdma_create_qp(p.client, nullptr, &qa));
        ret("client rdma_connect", rdma_connect(p.client, nullptr));
        if (take_event("server", p.sch, 0, &p.server) == RDMA_CM_EVENT_CONNECT_REQUEST) {
          uint8_t data[255];
          fill(data, len, 0x33);
          ret("server rdma_reject", ece ? rdma_reject_ece(p.server, data, len)
                                        : rdma_reject(p.server, data, len));
          take_event("client", p.cch, 0x33);
          qp("rejected client", p.client->qp);
          id("rejected client", p.client);
          ret("server rdma_reject again", rdma_reject(p.server, nullptr, 0));
        }
      }
      p.close();
    }
  }
}

// Read depths: what each side asks, what the other sees, what the QPs get.
void depths() {
  ibv_device_attr da{};
  {
    Pair p;
    begin("depths device");
    if (p.open(case_port)) {
      ret("ibv_query_device", ibv_query_device(p.client->verbs, &da));
      say("max_qp_rd_atom %d max_qp_init_rd_atom %d", da.max_qp_rd_atom, da.max_qp_init_rd_atom);
    }
    p.close();
  }
  auto max_rr = static_cast<uint8_t>(da.max_qp_rd_atom);
  auto max_id = static_cast<uint8_t>(da.max_qp_init_rd_atom);
  struct Depths {
    bool cnull;
    uint8_t c_rr, c_id;
    bool anull;
    uint8_t a_rr, a_id;
  };
  const Depths cases[] = {
      {true, 0, 0, true, 0, 0},
      {false, RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH, false, RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH},
      {false, 0, 0, false, 0, 0},
      {false, 1, 4, false, RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH},
      {false, 4, 1, false, 2, 3},
      {false, 16, 16, false, 1, 1},
      {false, max_rr, max_id, false, max_rr, max_id},
      {false, static_cast<uint8_t>(max_rr + 1), 1, false, 1, 1},
      {false, 1, static_cast<uint8_t>(max_id + 1), false, 1, 1},
      {false, 1, 1, false, static_cast<uint8_t>(max_rr + 1), 1},
      {false, 1, 1, false, 1, static_cast<uint8_t>(max_id + 1)},
  };
  int n = 0;
  for (const Depths& d : cases) {
    char name[96];
    std::snprintf(name, sizeof name, "depths %d: connect %s, accept %s", n++,
                  d.cnull ? "NULL" : "param", d.anull ? "NULL" : "param");
    begin(name);
    say("connect resp_res %u init_depth %u, accept resp_res %u init_depth %u", d.c_rr, d.c_id,
        d.a_rr, d.a_id);
    Pair p;
    if (p.open(case_port)) {
      rdma_conn_param c = param(d.c_rr, d.c_id), s = param(d.a_rr, d.a_id);
      ibv_qp_init_attr qa = rc_attr();
      ret("client rdma_create_qp", rdma_create_qp(p.client, nullptr, &qa));
      int r = rdma_connect(p.client, d.cnull ? nullptr : &c);
      ret("client rdma_connect", r);
      if (!r && take_event("server", p.sch, 0, &p.server) == RDMA_CM_EVENT_CONNECT_REQUEST) {
        qa = rc_attr();
        ret("server rdma_create_qp", rdma_create_qp(p.server, nullptr, &qa));
        r = rdma_accept(p.server, d.anull ? nullptr : &s);
        ret("server rdma_accept", r);
        if (r) {
          // Too deep: accept again within the device's limits.
          rdma_conn_param ok = param(1, 1);
          ret("server rdma_accept within limits", rdma_accept(p.server, &ok));
        }
        int ce = take_event("client", p.cch, 0);
        int se = take_event("server", p.sch, 0);
        p.connected = ce == RDMA_CM_EVENT_ESTABLISHED && se == RDMA_CM_EVENT_ESTABLISHED;
        qp("client", p.client->qp);
        qp("server", p.server->qp);
      }
    }
    p.close();
  }
}

// A QP the application made itself (ibv_create_qp), named by qp_num: the
// iw_cm moves it, and the active side still gets ESTABLISHED.
void own_qp() {
  begin("own_qp");
  Pair p;
  ibv_cq* cq = nullptr;
  ibv_qp* mine = nullptr;
  if (p.open(case_port)) {
    cq = ibv_create_cq(p.client->verbs, 8, nullptr, nullptr, 0);
    ibv_qp_init_attr qa = rc_attr();
    qa.send_cq = qa.recv_cq = cq;
    mine = cq ? ibv_create_qp(p.client->pd, &qa) : nullptr;
    say("ibv_create_qp %s", mine ? "ok" : "failed");
  }
  if (mine) {
    rdma_conn_param c = param(2, 2);
    c.qp_num = mine->qp_num;
    ret("client rdma_connect", rdma_connect(p.client, &c));
    if (take_event("server", p.sch, 0, &p.server) == RDMA_CM_EVENT_CONNECT_REQUEST) {
      ibv_qp_init_attr qa = rc_attr();
      ret("server rdma_create_qp", rdma_create_qp(p.server, nullptr, &qa));
      ret("server rdma_accept", rdma_accept(p.server, nullptr));
      int ce = take_event("client", p.cch, 0);
      int se = take_event("server", p.sch, 0);
      qp("own", mine);
      ibv_ece ece{};
      ret("client rdma_get_remote_ece", rdma_get_remote_ece(p.client, &ece));
      say("remote ece vendor %#x options %#x", ece.vendor_id, ece.options);
      ret("client rdma_establish", rdma_establish(p.client));
      p.connected = ce == RDMA_CM_EVENT_ESTABLISHED && se == RDMA_CM_EVENT_ESTABLISHED;
      if (p.connected) {
        ret("client rdma_disconnect", rdma_disconnect(p.client));
        take_event("server", p.sch, 0);
        take_event("client", p.cch, 0);
        qp("own disconnected", mine);
        p.connected = false;
      }
    }
  }
  p.close();
  if (mine) ibv_destroy_qp(mine);
  if (cq) ibv_destroy_cq(cq);
}

// On iWARP an id's port is a TCP port, and siw has no port mapper: a plain
// TCP socket holding the client's port (bound, or in TIME_WAIT after a
// close) makes rdma_connect fail EADDRINUSE; once it is gone, the same id
// connects. The kernel picks a client's port from the range TCP's own
// ephemeral ports come from, so on siw any TCP traffic on the host can
// collide with an rdma_connect now and then (rxe-vm's siw boot keeps no
// TIME_WAIT sockets for that reason).
void tcp_port_taken() {
  uint16_t port = begin("tcp_port_taken");
  uint16_t mine = static_cast<uint16_t>(port + 50);  // unique per case and run
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = device_addr(mine);
  ret("tcp socket bind to the client's port", bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a));
  Pair p;
  if (p.open(port, RDMA_PS_TCP, mine)) {
    ibv_qp_init_attr qa = rc_attr();
    ret("client rdma_create_qp", rdma_create_qp(p.client, nullptr, &qa));
    ret("client rdma_connect, the port held", rdma_connect(p.client, nullptr));
    ret("tcp socket close", close(s));
    s = -1;
    p.connect(nullptr, nullptr);
  }
  p.close();
  if (s >= 0) close(s);
}

// The server ends the connection; the client's disconnect after it.
void server_disconnects() {
  begin("server_disconnects");
  Pair p;
  if (p.open(case_port) && p.connect(nullptr, nullptr)) {
    ret("server rdma_disconnect", rdma_disconnect(p.server));
    take_event("client", p.cch, 0);
    take_event("server", p.sch, 0);
    qp("client", p.client->qp);
    qp("server", p.server->qp);
    ret("client rdma_disconnect", rdma_disconnect(p.client));
    p.connected = false;
  }
  p.close();
}

// Options, notify and migration on connected iWARP ids.
void options() {
  begin("options");
  Pair p;
  if (!p.open(case_port)) return p.close();
  uint8_t tos = 8, timeout = 14, retries = 5;
  int on = 1;
  ret("client TOS", rdma_set_option(p.client, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1));
  ret("client ACK_TIMEOUT",
      rdma_set_option(p.client, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1));
  ret("client RETRY", rdma_set_option(p.client, RDMA_OPTION_ID, 5 /* RETRY */, &retries, 1));
  ret("client REUSEADDR",
      rdma_set_option(p.client, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on));
  ret("listener AFONLY",
      rdma_set_option(p.listener, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof on));
  init_attrs("timed client", p.client);
  if (!p.connect(nullptr, nullptr)) return p.close();
  ret("server rdma_notify", rdma_notify(p.server, IBV_EVENT_COMM_EST));
  ret("client ACK_TIMEOUT connected",
      rdma_set_option(p.client, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1));
  rdma_event_channel* other = rdma_create_event_channel();
  ret("server rdma_migrate_id", rdma_migrate_id(p.server, other));
  ret("client rdma_disconnect", rdma_disconnect(p.client));
  take_event("migrated server", other, 0);
  take_event("client", p.cch, 0);
  p.connected = false;
  rdma_destroy_qp(p.server);
  rdma_destroy_id(p.server);
  p.server = nullptr;
  rdma_destroy_event_channel(other);
  p.close();
}

// Shared receive queues: the request's srq flag, and a QP on an SRQ.
void srq() {
  begin("srq");
  Pair p;
  if (!p.open(case_port)) return p.close();
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  ret("client rdma_create_srq", rdma_create_srq(p.client, nullptr, &sa));
  ibv_qp_init_attr qa = rc_attr();
  ret("client rdma_create_qp", rdma_create_qp(p.client, nullptr, &qa));
  say("client qp on srq: %s", p.client->qp && p.client->qp->srq ? "yes" : "no");
  ret("client rdma_connect", rdma_connect(p.client, nullptr));
  if (take_event("server", p.sch, 0, &p.server) == RDMA_CM_EVENT_CONNECT_REQUEST) {
    qa = rc_attr();
    ret("server rdma_create_qp", rdma_create_qp(p.server, nullptr, &qa));
    ret("server rdma_accept", rdma_accept(p.server, nullptr));
    int ce = take_event("client", p.cch, 0);
    int se = take_event("server", p.sch, 0);
    p.connected = ce == RDMA_CM_EVENT_ESTABLISHED && se == RDMA_CM_EVENT_ESTABLISHED;
  }
  if (p.connected) {
    ret("client rdma_disconnect", rdma_disconnect(p.client));
    take_event("server", p.sch, 0);
    take_event("client", p.cch, 0);
    p.connected = false;
  }
  rdma_destroy_qp(p.client);
  rdma_destroy_srq(p.client);
  p.close();
}

// The synchronous calls: rdma_create_ep, rdma_get_request, a blocking
// rdma_connect and rdma_accept (the server in a thread, printed after).
void endpoints() {
  uint16_t port = begin("endpoints");
  char service[8];
  std::snprintf(service, sizeof service, "%u", port);
  rdma_addrinfo hints{}, *sres = nullptr, *cres = nullptr;
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  ret("server rdma_getaddrinfo", rdma_getaddrinfo(std::getenv("RXE_IP"), service, &hints, &sres));
  hints.ai_flags = 0;
  ret("client rdma_getaddrinfo", rdma_getaddrinfo(std::getenv("RXE_IP"), service, &hints, &cres));
  if (!sres || !cres) return;
  rdma_cm_id *listener = nullptr, *client = nullptr;
  ibv_qp_init_attr qa = rc_attr();
  ret("server rdma_create_ep", rdma_create_ep(&listener, sres, nullptr, &qa));
  ret("rdma_listen", listener ? rdma_listen(listener, 4) : -1);
  qa = rc_attr();
  ret("client rdma_create_ep", rdma_create_ep(&client, cres, nullptr, &qa));
  if (!listener || !client) return;
  id("endpoint client", client);
  qp("endpoint client", client->qp);
  init_attrs("endpoint client", client);

  int get_r = -1, accept_r = -1;
  rdma_cm_id* server = nullptr;
  std::thread t([&] {
    get_r = rdma_get_request(listener, &server);
    if (!get_r) accept_r = rdma_accept(server, nullptr);
  });
  uint8_t data[100];
  fill(data, sizeof data, 0x11);
  rdma_conn_param c = param(RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH, data, sizeof data);
  int conn_r = rdma_connect(client, &c);
  t.join();
  ret("server rdma_get_request", get_r);
  ret("server rdma_accept", accept_r);
  ret("client rdma_connect", conn_r);
  if (server) {
    event("server's stored", server->event, 0x11);
    id("endpoint server", server);
    qp("endpoint server", server->qp);
  }
  event("client's stored", client->event, 0);
  qp("endpoint client", client->qp);
  if (!conn_r && !accept_r) {
    ret("client rdma_disconnect", rdma_disconnect(client));
    event("client's stored", client->event, 0);
    ret("server rdma_disconnect", rdma_disconnect(server));
    event("server's stored", server->event, 0);
  }
  if (server) rdma_destroy_ep(server);
  rdma_destroy_ep(client);
  rdma_destroy_ep(listener);
  rdma_freeaddrinfo(sres);
  rdma_freeaddrinfo(cres);
}

// What iWARP has not: UD QPs and multicast.
void datagrams() {
  begin("datagrams");
  Pair p;
  if (!p.open(case_port, RDMA_PS_UDP)) return p.close();
  id("udp client", p.client);
  init_attrs("udp client", p.client);
  ibv_qp_init_attr qa = rc_attr();
  qa.qp_type = IBV_QPT_UD;
  ret("client rdma_create_qp UD", rdma_create_qp(p.client, nullptr, &qa));
  sockaddr_in group{};
  group.sin_family = AF_INET;
  group.sin_addr.s_addr = htonl(0xe0010203);  // 224.1.2.3
  ret("client rdma_join_multicast",
      rdma_join_multicast(p.client, reinterpret_cast<sockaddr*>(&group), nullptr));
  p.close();
}

}  // namespace
}  // namespace iwt

int main(int argc, char** argv) {
  if (argc != 2 || !std::getenv("RXE_IP")) {
    std::fprintf(stderr, "usage: RXE_IP=ADDR %s BASE_PORT\n", argv[0]);
    return 2;
  }
  iwt::next_port = static_cast<uint16_t>(std::atoi(argv[1]));
  // Which library answers (cmtable.py checks it).
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&rdma_create_id), &info) && info.dli_fname)
    std::fprintf(stderr, "rdma_create_id from %s\n", info.dli_fname);
  iwt::stages();
  iwt::private_data();
  iwt::rejections();
  iwt::depths();
  iwt::own_qp();
  iwt::server_disconnects();
  iwt::tcp_port_taken();
  iwt::options();
  iwt::srq();
  iwt::endpoints();
  iwt::datagrams();
  std::printf("end\n");
  return 0;
}
