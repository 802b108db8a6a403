// local_failures: one VM's failure cases, driven by tests/rxe/failures/local.sh,
// which changes the network and the device under it and checks what this
// prints (the same lines on rdma-core's library, LD_PRELOADed, and on ours).
//
//   local_failures resolve IP               rdma_resolve_addr (2 s), then route
//   local_failures serve PORT               accept every connection, until killed
//   local_failures reconnect PORT           connect; after DISCONNECTED, retry with
//                                           new ids until one is ESTABLISHED again
//   local_failures watch IP PORT SECONDS STOP_FILE
//                                           ids bound, listening and connected on
//                                           IP; print every event until STOP_FILE
//                                           exists (SECONDS at most)
//   local_failures removal PORT             ids bound, listening and connected;
//                                           wait for DEVICE_REMOVAL on each, destroy
//                                           everything, then stay alive 20 s
// Lines: "EVENT <id name> <EVENT>(<status>) t=<s>", "RESULT ...", "READY",
// "DESTROYED". Times are seconds since the program's READY (or start).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

double t0 = 0;
double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
double t() { return now() - t0; }

[[noreturn]] void die(const char* what) {
  std::printf("FAILED %s: %s\n", what, std::strerror(errno));
  std::fflush(stdout);
  std::exit(2);
}

sockaddr_in addr_of(const char* ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
    std::printf("FAILED bad address %s\n", ip);
    std::exit(2);
  }
  return a;
}
sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

rdma_cm_event* next_event(rdma_event_channel* ch, int ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return nullptr;
  rdma_cm_event* ev = nullptr;
  return rdma_get_cm_event(ch, &ev) ? nullptr : ev;
}

std::string text(const rdma_cm_event* ev) {
  return std::string(rdma_event_str(ev->event)) + "(" + std::to_string(ev->status) + ")";
}

// Waits for one event of this type (others are printed and fail).
bool expect(rdma_event_channel* ch, rdma_cm_event_type type, const char* what,
            rdma_cm_event** out = nullptr, int ms = 10000) {
  rdma_cm_event* ev = next_event(ch, ms);
  if (!ev) {
    std::printf("RESULT %s: no event, expected %s\n", what, rdma_event_str(type));
    return false;
  }
  bool ok = ev->event == type;
  if (!ok) std::printf("RESULT %s: %s, expected %s\n", what, text(ev).c_str(), rdma_event_str(type));
  if (out && ok)
    *out = ev;
  else
    rdma_ack_cm_event(ev);
  return ok;
}

ibv_qp_init_attr qp_attr() {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  return a;
}

// resolve: what address and route resolution give for an address.
int resolve(const char* ip) {
  t0 = now();
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) die("rdma_create_event_channel");
  rdma_cm_id* id;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) die("rdma_create_id");
  sockaddr_in dst = addr_of(ip, 7471);
  if (rdma_resolve_addr(id, nullptr, sa(dst), 2000)) {
    std::printf("RESULT resolve_addr %s: -1 errno=%s\n", ip, strerrorname_np(errno));
  } else {
    rdma_cm_event* ev = next_event(ch, 30000);
    if (!ev) {
      std::printf("RESULT resolve_addr %s: no event in 30 s\n", ip);
    } else {
      std::printf("RESULT resolve_addr %s: %s within=%s\n", ip, text(ev).c_str(),
                  t() < 10 ? "10s" : "SLOW");
      bool resolved = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED;
      rdma_ack_cm_event(ev);
      if (resolved) {
        if (rdma_resolve_route(id, 2000)) {
          std::printf("RESULT resolve_route %s: -1 errno=%s\n", ip, strerrorname_np(errno));
        } else if ((ev = next_event(ch, 30000))) {
          std::printf("RESULT resolve_route %s: %s\n", ip, text(ev).c_str());
          rdma_ack_cm_event(ev);
        }
      }
    }
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return 0;
}

// serve: accepts every connection (QP on the library's PD and CQs).
int serve(int port) {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) die("rdma_create_event_channel");
  rdma_cm_id* listener;
  if (rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP)) die("rdma_create_id");
  sockaddr_in a = addr_of(std::getenv("RXE_IP") ? std::getenv("RXE_IP") : "", port);
  if (rdma_bind_addr(listener, sa(a))) die("rdma_bind_addr");
  if (rdma_listen(listener, 8)) die("rdma_listen");
  std::printf("LISTENING %d\n", port);
  std::fflush(stdout);
  for (;;) {
    rdma_cm_event* ev = next_event(ch, -1);
    if (!ev) die("rdma_get_cm_event");
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_cm_id* id = ev->id;
      rdma_ack_cm_event(ev);
      ibv_qp_init_attr qa = qp_attr();
      rdma_conn_param p{};
      p.retry_count = 7;
      if (rdma_create_qp(id, nullptr, &qa) || rdma_accept(id, &p)) die("accept");
      continue;
    }
    if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
      rdma_cm_id* id = ev->id;
      rdma_ack_cm_event(ev);
      rdma_destroy_qp(id);
      rdma_destroy_id(id);
      continue;
    }
    rdma_ack_cm_event(ev);
  }
}

struct Id {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
};

Id new_id() {
  Id i;
  if (!(i.ch = rdma_create_event_channel())) die("rdma_create_event_channel");
  if (rdma_create_id(i.ch, &i.id, nullptr, RDMA_PS_TCP)) die("rdma_create_id");
  return i;
}

void drop(Id& i) {
  if (i.id && i.id->qp) rdma_destroy_qp(i.id);
  if (i.id) rdma_destroy_id(i.id);
  if (i.ch) rdma_destroy_event_channel(i.ch);
  i = Id{};
}

// Resolves and connects a new id to ip:port; returns the final event type
// (ESTABLISHED, REJECTED ...) or -1.
int connect_to(Id& c, const char* ip, int port, bool qp = true) {
  sockaddr_in dst = addr_of(ip, port);
  if (rdma_resolve_addr(c.id, nullptr, sa(dst), 2000)) return -1;
  if (!expect(c.ch, RDMA_CM_EVENT_ADDR_RESOLVED, "connect: address")) return -1;
  if (rdma_resolve_route(c.id, 2000)) return -1;
  if (!expect(c.ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "connect: route")) return -1;
  ibv_qp_init_attr qa = qp_attr();
  if (qp && rdma_create_qp(c.id, nullptr, &qa)) return -1;
  rdma_conn_param p{};
  p.retry_count = 7;
  if (rdma_connect(c.id, &p)) return -1;
  rdma_cm_event* ev = next_event(c.ch, 30000);
  if (!ev) return -1;
  int type = ev->event;
  if (type != RDMA_CM_EVENT_ESTABLISHED)
    std::printf("connect: %s at t=%.1f\n", text(ev).c_str(), t());
  rdma_ack_cm_event(ev);
  return type;
}

// reconnect: the server process is killed and started again (local.sh).
int reconnect(int port) {
  t0 = now();
  const char* ip = std::getenv("RXE_IP");
  Id c = new_id();
  if (connect_to(c, ip, port) != RDMA_CM_EVENT_ESTABLISHED) die("first connection");
  std::printf("ESTABLISHED 1\n");
  std::fflush(stdout);
  rdma_cm_event* ev = next_event(c.ch, 60000);
  if (!ev) {
    std::printf("RESULT reconnect: no event on the connection within 60 s of its server's death\n");
    return 1;
  }
  double t_dis = t();
  std::printf("RESULT server killed: %s\n", text(ev).c_str());
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);  // for local.sh, against the kill's time
  std::printf("DISCONNECTED_EPOCH %ld.%06ld\n", static_cast<long>(rt.tv_sec), rt.tv_nsec / 1000);
  rdma_ack_cm_event(ev);
  drop(c);
  int refused = 0;
  for (int attempt = 0; attempt < 120; ++attempt) {
    Id n = new_id();
    int r = connect_to(n, ip, port);
    if (r == RDMA_CM_EVENT_ESTABLISHED) {
      std::printf("RESULT reconnect: ESTABLISHED again with a new id after %d refusal(s), %.1f s after the disconnect\n",
                  refused, t() - t_dis);
      drop(n);
      return 0;
    }
    if (r == RDMA_CM_EVENT_REJECTED) {
      // local.sh restarts the server once it has seen this.
      std::printf("REFUSED %d\n", ++refused);
      std::fflush(stdout);
    }
    drop(n);
    usleep(250000);
  }
  std::printf("RESULT reconnect: never ESTABLISHED again\n");
  return 1;
}

// The ids of watch and removal: bound, listening, a connected pair.
struct Set {
  Id bound, listen, client, accepted;
};

Set make_set(const char* ip, int port) {
  Set s;
  s.bound = new_id();
  s.listen = new_id();
  s.client = new_id();
  sockaddr_in b = addr_of(ip, port + 1);
  if (rdma_bind_addr(s.bound.id, sa(b))) die("rdma_bind_addr (bound)");
  sockaddr_in l = addr_of(ip, port);
  if (rdma_bind_addr(s.listen.id, sa(l))) die("rdma_bind_addr (listen)");
  if (rdma_listen(s.listen.id, 4)) die("rdma_listen");
  sockaddr_in dst = addr_of(ip, port);
  if (rdma_resolve_addr(s.client.id, nullptr, sa(dst), 2000)) die("rdma_resolve_addr");
  if (!expect(s.client.ch, RDMA_CM_EVENT_ADDR_RESOLVED, "address")) die("address");
  if (rdma_resolve_route(s.client.id, 2000)) die("rdma_resolve_route");
  if (!expect(s.client.ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "route")) die("route");
  ibv_qp_init_attr qa = qp_attr();
  if (rdma_create_qp(s.client.id, nullptr, &qa)) die("rdma_create_qp");
  rdma_conn_param p{};
  p.retry_count = 7;
  if (rdma_connect(s.client.id, &p)) die("rdma_connect");
  rdma_cm_event* ev;
  if (!expect(s.listen.ch, RDMA_CM_EVENT_CONNECT_REQUEST, "request", &ev)) die("request");
  s.accepted.id = ev->id;
  rdma_ack_cm_event(ev);
  if (!(s.accepted.ch = rdma_create_event_channel())) die("rdma_create_event_channel");
  if (rdma_migrate_id(s.accepted.id, s.accepted.ch)) die("rdma_migrate_id");
  // Fresh attributes: rdma_create_qp wrote the client's CQs into qa.
  ibv_qp_init_attr qa2 = qp_attr();
  if (rdma_create_qp(s.accepted.id, nullptr, &qa2)) die("rdma_create_qp");
  if (rdma_accept(s.accepted.id, &p)) die("rdma_accept");
  if (!expect(s.client.ch, RDMA_CM_EVENT_ESTABLISHED, "client established")) die("connect");
  if (!expect(s.accepted.ch, RDMA_CM_EVENT_ESTABLISHED, "server established")) die("accept");
  return s;
}

// Prints every event of the set's ids for `seconds`; returns how many came.
// With stop_on_removal, returns once each id has had DEVICE_REMOVAL; with a
// stop_file, once that file exists (*stopped := true).
int watch_set(Set& s, double seconds, bool stop_on_removal, const char* stop_file = nullptr,
              bool* stopped = nullptr) {
  struct {
    const char* name;
    Id* id;
    bool removed;
  } ids[] = {{"bound", &s.bound, false}, {"listening", &s.listen, false},
             {"client", &s.client, false}, {"accepted", &s.accepted, false}};
  int n = 0, removed = 0;
  double end = now() + seconds;
  while (now() < end) {
    if (stop_file && access(stop_file, F_OK) == 0) {
      *stopped = true;
      break;
    }
    std::vector<pollfd> p;
    for (auto& i : ids) p.push_back({i.id->ch->fd, POLLIN, 0});
    if (poll(p.data(), p.size(), 200) <= 0) continue;
    for (size_t k = 0; k < p.size(); ++k) {
      if (!(p[k].revents & POLLIN)) continue;
      rdma_cm_event* ev;
      if (rdma_get_cm_event(ids[k].id->ch, &ev)) continue;
      std::printf("EVENT %s %s t=%.1f\n", ids[k].name, text(ev).c_str(), t());
      std::fflush(stdout);
      n++;
      if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL && !ids[k].removed) {
        ids[k].removed = true;
        removed++;
      }
      rdma_ack_cm_event(ev);
    }
    if (stop_on_removal && removed == 4) break;
  }
  if (stop_on_removal)
    std::printf("RESULT removal: DEVICE_REMOVAL on %d of 4 ids\n", removed);
  return n;
}

// A send on the connected pair: does it still get through?
void probe_send(Set& s, const char* when) {
  static char buf[64];
  ibv_mr* mr = ibv_reg_mr(s.client.id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* rmr = ibv_reg_mr(s.accepted.id->pd, buf + 32, 32, IBV_ACCESS_LOCAL_WRITE);
  if (!mr || !rmr) die("ibv_reg_mr");
  ibv_sge rs{reinterpret_cast<uintptr_t>(buf + 32), 32, rmr->lkey};
  ibv_recv_wr rw{}, *rbad;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_sge ss{reinterpret_cast<uintptr_t>(buf), 16, mr->lkey};
  ibv_send_wr sw{}, *sbad;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  if (ibv_post_recv(s.accepted.id->qp, &rw, &rbad) || ibv_post_send(s.client.id->qp, &sw, &sbad))
    die("post");
  ibv_wc wc;
  double end = now() + 30;
  int n = 0;
  while (now() < end && (n = ibv_poll_cq(s.client.id->send_cq, 1, &wc)) == 0) usleep(1000);
  std::printf("RESULT send %s: %s\n", when, n == 1 ? ibv_wc_status_str(wc.status) : "no completion in 30 s");
  while (ibv_poll_cq(s.accepted.id->recv_cq, 1, &wc) == 1) {
  }
  ibv_dereg_mr(mr);
  ibv_dereg_mr(rmr);
}

void drop_set(Set& s) {
  drop(s.client);
  drop(s.accepted);
  drop(s.listen);
  drop(s.bound);
}

// watch: local.sh changes IP's address under the ids after READY, then makes
// STOP_FILE; SECONDS is only a bound (the result says which ended the watch,
// so that a watch that ended before the changes were done cannot pass).
int watch(const char* ip, int port, int seconds, const char* stop_file) {
  Set s = make_set(ip, port);
  t0 = now();
  std::printf("READY\n");
  std::fflush(stdout);
  bool stopped = false;
  int n = watch_set(s, seconds, false, stop_file, &stopped);
  std::printf("RESULT watch: %d event(s) in %.1f s, %s\n", n, t(),
              stopped ? "until told to stop" : "TIME LIMIT REACHED before the changes were done");
  probe_send(s, "after the change");
  drop_set(s);
  return 0;
}

int removal(int port) {
  const char* ip = std::getenv("RXE_IP");
  Set s = make_set(ip, port);
  t0 = now();
  std::printf("READY\n");
  std::fflush(stdout);
  watch_set(s, 60, true);
  drop_set(s);
  std::printf("DESTROYED t=%.1f\n", t());
  std::fflush(stdout);
  sleep(20);  // alive: the device may go now, if the library let it
  std::printf("EXIT t=%.1f\n", t());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "resolve" && argc == 3) return resolve(argv[2]);
  if (mode == "serve" && argc == 3) return serve(std::atoi(argv[2]));
  if (mode == "reconnect" && argc == 3) return reconnect(std::atoi(argv[2]));
  if (mode == "watch" && argc == 6)
    return watch(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), argv[5]);
  if (mode == "removal" && argc == 3) return removal(std::atoi(argv[2]));
  std::fprintf(stderr,
               "usage: local_failures resolve IP | serve PORT | reconnect PORT |"
               " watch IP PORT SECONDS STOP_FILE | removal PORT\n");
  return 2;
}
