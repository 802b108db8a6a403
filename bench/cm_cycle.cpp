// The connection manager's own connect and disconnect, one connection after
// another in one process (issue 39's "within 2x of the CM's own"): the
// baseline of bench/conn_cycle.sh's socket cycle. cmtime, the CM's own
// benchmark, cannot give it: its figures are averages over connections made
// all at once, and its server hands every connection the CQs its first QP
// was given (one static ibv_qp_init_attr that rdma_create_qp writes back), so
// a second client after the first one's end is refused.
// N cycles of: create id, resolve address and route, create QP, connect
// (until ESTABLISHED), disconnect (until DISCONNECTED), destroy QP and id,
// on one event channel; against a server (forked) that accepts each request
// with a QP of the same size and destroys it at its DISCONNECTED.
//
//   cm_cycle --addr IP [--port P] [--cycles N] [--depth D]
//
// --depth: the QP's send and receive queues (default 1, cmtime's; rsockets'
// are 384 each, with 2 send SGEs and 64 bytes inline, which --depth 384
// also takes). Prints one line: cycles=N cycle_us=MEDIAN p90_us=P90
// connect_us=MEDIAN close_us=MEDIAN (create id to ESTABLISHED; disconnect to
// destroyed). Exit status 1 if a cycle failed (what failed on stderr).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cycle_common.h"

namespace {

using namespace bench;

ibv_qp_init_attr qp_attr(uint32_t depth) {
  ibv_qp_init_attr a{};  // a fresh one each time: the library writes the CQs back
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = depth;
  a.cap.max_send_sge = depth > 1 ? 2 : 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = depth > 1 ? 64 : 0;
  return a;
}

// The next event on `ch`, which must be `want` (its id in *id); acknowledged.
bool next(rdma_event_channel* ch, rdma_cm_event_type want, rdma_cm_id** id, const char* who) {
  rdma_cm_event* ev;
  if (rdma_get_cm_event(ch, &ev)) {
    fprintf(stderr, "%s: rdma_get_cm_event: %s\n", who, strerror(errno));
    return false;
  }
  rdma_cm_event_type got = ev->event;
  int status = ev->status;
  if (id) *id = ev->id;
  rdma_ack_cm_event(ev);
  if (got == want) return true;
  fprintf(stderr, "%s: %s (status %d) where %s was due\n", who, rdma_event_str(got), status,
          rdma_event_str(want));
  return false;
}

// Accepts `cycles` connections one at a time, each with a QP of `depth`,
// and destroys each at its DISCONNECTED. Says it listens with a byte on `ready`.
int serve(const sockaddr_in& sin, int cycles, uint32_t depth, int ready) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* listen_id = nullptr;
  if (!ch || rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP) ||
      rdma_bind_addr(listen_id, reinterpret_cast<sockaddr*>(const_cast<sockaddr_in*>(&sin))) ||
      rdma_listen(listen_id, 128)) {
    perror("server: create, bind or listen");
    return 1;
  }
  if (write(ready, "x", 1) != 1) return 1;
  for (int i = 0; i < cycles; i++) {
    rdma_cm_id* id;
    if (!next(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &id, "server")) return 1;
    ibv_qp_init_attr a = qp_attr(depth);
    rdma_conn_param param{};
    param.responder_resources = param.initiator_depth = 1;
    if (rdma_create_qp(id, nullptr, &a) || rdma_accept(id, &param)) {
      perror("server: create QP or accept");
      return 1;
    }
    if (!next(ch, RDMA_CM_EVENT_ESTABLISHED, nullptr, "server") ||
        !next(ch, RDMA_CM_EVENT_DISCONNECTED, nullptr, "server"))
      return 1;
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(ch);
  return 0;
}

// One cycle, its two steps' times in *connect_us and *close_us.
bool cycle(rdma_event_channel* ch, sockaddr_in& sin, uint32_t depth, double* connect_us,
           double* close_us) {
  double t0 = now_us();
  rdma_cm_id* id;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) return perror("rdma_create_id"), false;
  bool ok = false;
  ibv_qp_init_attr a = qp_attr(depth);
  rdma_conn_param param{};
  param.responder_resources = param.initiator_depth = 1;
  param.retry_count = 2;  // cmtime's
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&sin), 2000))
    perror("rdma_resolve_addr");
  else if (!next(ch, RDMA_CM_EVENT_ADDR_RESOLVED, nullptr, "client")) {
  } else if (rdma_resolve_route(id, 2000))
    perror("rdma_resolve_route");
  else if (!next(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, nullptr, "client")) {
  } else if (rdma_create_qp(id, nullptr, &a))
    perror("rdma_create_qp");
  else if (rdma_connect(id, &param))
    perror("rdma_connect");
  else
    ok = next(ch, RDMA_CM_EVENT_ESTABLISHED, nullptr, "client");
  double t1 = now_us();
  if (ok && rdma_disconnect(id)) ok = false, perror("rdma_disconnect");
  if (ok) ok = next(ch, RDMA_CM_EVENT_DISCONNECTED, nullptr, "client");
  if (id->qp) rdma_destroy_qp(id);
  rdma_destroy_id(id);
  *connect_us = t1 - t0;
  *close_us = now_us() - t1;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const char* addr = nullptr;
  int port = 7460, cycles = 200;
  long depth = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--addr") addr = argv[i + 1];
    else if (a == "--port") port = atoi(argv[i + 1]);
    else if (a == "--cycles") cycles = atoi(argv[i + 1]);
    else if (a == "--depth") depth = strtol(argv[i + 1], nullptr, 10);
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  if (!addr || inet_pton(AF_INET, addr, &sin.sin_addr) != 1 || cycles < 1 || depth < 1 ||
      depth > 16384) {
    fprintf(stderr, "usage: cm_cycle --addr IPv4 [--port P] [--cycles N] [--depth D]\n");
    return 2;
  }
  pid_t server = fork_server([&](int ready) { return serve(sin, cycles, static_cast<uint32_t>(depth), ready); });
  if (server < 0) return 1;
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) return perror("rdma_create_event_channel"), 1;
  std::vector<double> whole, connect_us, close_us;
  bool failed = false;
  for (int i = 0; i < cycles && !failed; i++) {
    double c, d;
    failed = !cycle(ch, sin, static_cast<uint32_t>(depth), &c, &d);
    if (failed) {
      fprintf(stderr, "cycle %d failed\n", i);
      break;
    }
    whole.push_back(c + d);
    connect_us.push_back(c);
    close_us.push_back(d);
  }
  rdma_destroy_event_channel(ch);
  bool server_ok = server_done(server, failed);
  printf("cycles=%zu cycle_us=%.0f p90_us=%.0f connect_us=%.0f close_us=%.0f\n", whole.size(),
         median(whole), p90(whole), median(connect_us), median(close_us));
  return failed || !server_ok ? 1 : 0;
}
