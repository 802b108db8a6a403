// peer_death: the library's side of a peer host that dies, for
// tests/rxe/failures/host_death_{server,client}.sh (two VMs, `rxe-vm run2`).
//
//   peer_death server PORT LABEL     (on the surviving host)
//   peer_death client PORT           (on the host that dies)
//   peer_death handshake PORT        (client: send a connection request, then nothing)
//   peer_death unreachable IP        (connect to an address whose neighbour
//                                     entry is static and that nobody owns)
//
// The client opens three connections to the server, told apart by their
// private data: "B" stays idle, "C" receives a stream of SENDs from the
// server, "A" is requested but never completed (the client never reads its
// events, so it sends no RTU whatever the server does). Once B and C are
// established and A requested, the client's script gives the server notice
// (a TCP connection to PORT + kNoticeOffset on the server's address) and
// powers its VM off at once. The server dates the death by C's last
// successful send: C's transfer must then stop for kStallS after the notice
// (a stall before it is a client that lives on a slow host, not a death; the
// transfer goes on). It prints "DIE <LABEL> at <epoch seconds>", and checks,
// with times counted from the death; B and C have the ack timeout set to 14
// (RDMA_OPTION_ID_ACK_TIMEOUT: 67 ms, 7 retries):
//   C (mid-transfer): no send completes after the death, and none fails
//     either within kGiveUpS (measured on Soft-RoCE, Linux 6.1, both
//     libraries); a RETRY_EXC_ERR would be accepted;
//   B (idle): no event at all for kIdleS (nothing on the wire tells the
//     kernel); a probe SEND then neither completes nor fails by kGiveUpS;
//   B and C then give up: rdma_disconnect gives RDMA_CM_EVENT_DISCONNECTED
//     within kCmBoundS (the DREQ is never answered: status -ETIMEDOUT, ~66 s),
//     every outstanding send flushes, and the destroy returns at once;
//   A (mid-handshake): accepted once the death is seen; never ESTABLISHED: either
//     UNREACHABLE/CONNECT_ERROR or no event for kHandshakeS (measured: none),
//     and its destroy returns at once.
// Each result is printed as "RESULT LABEL CASE what=... t=SECONDS"; the
// exit status is 0 only if every case got what it must, within its bound.
// The same binary runs on rdma-core's library (LD_PRELOAD) for comparison.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "../../common/time_scale.h"

namespace {

constexpr int kIdleS = 8;         // B must stay silent this long after the death
constexpr int kGiveUpS = 20;      // B and C: the application gives up then
constexpr int kStallS = 3;        // C stopped this long after the notice: the host is gone (scaled)
constexpr int kNoticeOffset = 1000;  // the notice's TCP port: the server's port + this
constexpr int kNoNoticeS = 150;   // C stopped this long and no notice: the client's script failed
constexpr int kHandshakeS = 90;   // A: how long to wait for an event
constexpr int kCmBoundS = 200;    // REP/DREQ: 16 sends of 4-8 s, plus slack under TCG
constexpr uint32_t kMsg = 4096;
constexpr int kDepth = 16;

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::atomic<double> t_die{0};
const char* label = "?";
std::atomic<int> failures{0};

double since_die() { return now() - t_die.load(); }

// The listening TCP socket the client's notice connects to (server only).
int notice_fd = -1;

// Opens the notice port: TCP, the server's address, port + kNoticeOffset.
void open_notice(sockaddr_in a, int port) {
  a.sin_port = htons(static_cast<uint16_t>(port + kNoticeOffset));
  int one = 1;
  notice_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (notice_fd < 0 || setsockopt(notice_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
      bind(notice_fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) || listen(notice_fd, 4)) {
    std::printf("peer_death: notice port %d: %s\n", port + kNoticeOffset, std::strerror(errno));
    std::exit(2);
  }
}

// Whether the client has given notice (its connection waits to be accepted).
bool noticed() {
  static bool seen = false;
  if (!seen) {
    pollfd p{notice_fd, POLLIN, 0};
    seen = poll(&p, 1, 0) == 1;
  }
  return seen;
}

void result(const char* c, const std::string& what, bool ok) {
  std::printf("RESULT %s %s %s t=%.1f%s\n", label, c, what.c_str(), since_die(),
              ok ? "" : " FAIL");
  std::fflush(stdout);
  if (!ok) failures++;
}

[[noreturn]] void die(const char* what) {
  std::printf("peer_death %s: %s: %s\n", label, what, std::strerror(errno));
  std::fflush(stdout);
  std::exit(2);
}

// Next event on ch within ms (nullptr on timeout).
rdma_cm_event* next_event(rdma_event_channel* ch, int ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return nullptr;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev)) return nullptr;
  return ev;
}

std::string event_text(const rdma_cm_event* ev) {
  return std::string(rdma_event_str(ev->event)) + "(" + std::to_string(ev->status) + ")";
}

struct Conn {
  rdma_cm_id* id = nullptr;
  rdma_event_channel* ch = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<char> buf = std::vector<char>(kMsg * kDepth);
};

void make_qp(Conn& c) {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = kDepth;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  if (rdma_create_qp(c.id, nullptr, &a)) die("rdma_create_qp");
  c.mr = ibv_reg_mr(c.id->pd, c.buf.data(), c.buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!c.mr) die("ibv_reg_mr");
}

bool post(Conn& c, int slot, bool send) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(&c.buf[slot * kMsg]), kMsg, c.mr->lkey};
  if (send) {
    ibv_send_wr wr{}, *bad;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    return ibv_post_send(c.id->qp, &wr, &bad) == 0;
  }
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(c.id->qp, &wr, &bad) == 0;
}

rdma_conn_param conn_param(const char* tag) {
  rdma_conn_param p{};
  p.private_data = tag;
  p.private_data_len = 1;
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = 7;  // as rping: the most the CM allows
  p.rnr_retry_count = 7;
  return p;
}

// Completions on c's send CQ until `until` (seconds after the death): when the
// last success came (seconds after the death), and the first error (IBV_WC_SUCCESS if none).
ibv_wc_status drain_until(Conn& c, double until, double* last_ok, bool repost) {
  ibv_wc wc;
  while (since_die() < until) {
    int n = ibv_poll_cq(c.id->send_cq, 1, &wc);
    if (n < 0) die("ibv_poll_cq");
    if (n == 0) {
      usleep(500);
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) return wc.status;
    *last_ok = since_die();
    if (repost && !post(c, static_cast<int>(wc.wr_id), true)) die("post send");
  }
  return IBV_WC_SUCCESS;
}

// What an application that gives up on a silent peer does: rdma_disconnect.
// DISCONNECTED must come within the CM's timeouts (the DREQ is never
// answered: status -ETIMEDOUT); the QP goes to ERR, so the sends still
// outstanding must flush; and the destroy must not wait.
void give_up(Conn& c, const char* name, int outstanding) {
  double t = now();
  if (rdma_disconnect(c.id)) {
    result(name, std::string("rdma_disconnect=") + std::strerror(errno), false);
    return;
  }
  rdma_cm_event* ev = next_event(c.ch, kCmBoundS * 1000);
  char took[32];
  std::snprintf(took, sizeof(took), "%.1f", now() - t);
  if (!ev) {
    result(name, "disconnect: no event within " + std::to_string(kCmBoundS) + " s", false);
  } else {
    result(name, "disconnect=" + event_text(ev) + " after=" + took + "s",
           ev->event == RDMA_CM_EVENT_DISCONNECTED);
    rdma_ack_cm_event(ev);
  }
  ibv_wc wc;
  int flushed = 0;
  double end = now() + 10;
  while (flushed < outstanding && now() < end) {
    int n = ibv_poll_cq(c.id->send_cq, 1, &wc);
    if (n == 1 && wc.status == IBV_WC_WR_FLUSH_ERR) ++flushed;
    if (n == 0) usleep(1000);
  }
  result(name, "flushed=" + std::to_string(flushed) + "/" + std::to_string(outstanding),
         flushed == outstanding);
}

// The destroy of every id must return at once, whatever state it is in.
void timed_destroy(Conn& c, const char* name) {
  double t = now();
  if (c.id && c.id->qp) rdma_destroy_qp(c.id);
  if (c.mr) ibv_dereg_mr(c.mr);
  int r = c.id ? rdma_destroy_id(c.id) : 0;
  char took[32];
  std::snprintf(took, sizeof(took), "%.2f", now() - t);
  result(name, std::string("destroy=") + (r ? std::strerror(errno) : "0") + " in " + took + "s",
         r == 0 && now() - t < rdmacm::test::scaled_s(5));
  c.id = nullptr;
  c.mr = nullptr;
  if (c.ch) rdma_destroy_event_channel(c.ch);
  c.ch = nullptr;
}

// C: keeps kDepth sends in flight. After the death none may complete, and
// on Soft-RoCE (Linux 6.1) none fails either, even with a 67 ms ack timeout
// (measured: nothing in 60 s); the application gives up at kGiveUpS.
void run_c(Conn* c) {
  for (int i = 0; i < kDepth; ++i)
    if (!post(*c, i, true)) die("post send");
  long before = 0;
  ibv_wc_status st = IBV_WC_SUCCESS;
  ibv_wc wc;
  double last = now();
  const double stall = rdmacm::test::scaled_s(kStallS);
  bool stalled = false;  // said so for this stall
  for (;;) {  // the transfer, until it stops after the notice: the host is gone
    int n = ibv_poll_cq(c->id->send_cq, 1, &wc);
    if (n < 0) die("ibv_poll_cq");
    if (n == 0 && before && now() - last > stall) {
      if (noticed()) {
        // One more look a moment later: a server VM that was itself held
        // up on a loaded host sees the time pass before the completions
        // that came meanwhile.
        usleep(100000);
        n = ibv_poll_cq(c->id->send_cq, 1, &wc);
        if (n < 0) die("ibv_poll_cq");
        if (n == 0) break;
      } else if (!stalled) {
        stalled = true;
        std::printf("C: no completion for %.1f s and no notice yet: not the death; going on\n",
                    now() - last);
        std::fflush(stdout);
      } else if (now() - last > kNoNoticeS) {
        std::printf("peer_death %s: C stopped %d s ago and the client gave no notice\n", label,
                    kNoNoticeS);
        std::fflush(stdout);
        std::exit(2);
      }
    }
    if (n == 0) {
      usleep(100);
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) {
      st = wc.status;
      break;
    }
    ++before;
    last = now();
    if (stalled) {
      std::printf("C: the transfer goes on (%ld sends completed)\n", before);
      std::fflush(stdout);
      stalled = false;
    }
    if (!post(*c, static_cast<int>(wc.wr_id), true)) die("post send");
  }
  // The death: C's last successful send. Wall-clock time for host_death_server.sh.
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  double epoch = rt.tv_sec + rt.tv_nsec / 1e9 - (now() - last);
  t_die = last;
  std::printf("DIE %s at %.3f (C: %ld sends completed, then none for %.1f s, after the notice)\n",
              label, epoch, before, now() - last);
  std::fflush(stdout);
  if (st == IBV_WC_SUCCESS) {
    double last_ok = -1;
    st = drain_until(*c, kGiveUpS, &last_ok, true);
    if (st == IBV_WC_SUCCESS) {
      char when[64] = "";
      if (last_ok >= 0) std::snprintf(when, sizeof(when), " (but one %.1f s after)", last_ok);
      result("C", "mid-transfer: no completion for " + std::to_string(kGiveUpS) +
                      " s after the transfer stopped" + when,
             last_ok < 0);
    }
  }
  if (st != IBV_WC_SUCCESS)
    result("C", std::string("mid-transfer wc=") + ibv_wc_status_str(st),
           st == IBV_WC_RETRY_EXC_ERR);
  give_up(*c, "C", st == IBV_WC_SUCCESS ? kDepth : kDepth - 1);
  timed_destroy(*c, "C");
}

// B: idle. Nothing tells the kernel the peer is gone: no event for kIdleS;
// then a probe SEND, and the same give-up as C.
void run_b(Conn* b) {
  while (!t_die.load()) usleep(10000);
  rdma_cm_event* ev = next_event(b->ch, kIdleS * 1000);
  if (ev) {
    result("B", "idle: unexpected " + event_text(ev), false);
    rdma_ack_cm_event(ev);
  } else {
    result("B", "idle: no event for " + std::to_string(kIdleS) + " s", true);
  }
  if (!post(*b, 0, true)) die("probe send");
  double last_ok = -1;
  ibv_wc_status st = drain_until(*b, kGiveUpS, &last_ok, false);
  if (st == IBV_WC_SUCCESS)
    result("B", "probe: no completion by " + std::to_string(kGiveUpS) + " s", last_ok < 0);
  else
    result("B", std::string("probe wc=") + ibv_wc_status_str(st), st == IBV_WC_RETRY_EXC_ERR);
  give_up(*b, "B", st == IBV_WC_SUCCESS ? 1 : 0);
  timed_destroy(*b, "B");
}

// A: accepted once the death is seen (the notice, then kStallS without a
// completion on C). Never ESTABLISHED; UNREACHABLE/CONNECT_ERROR when the
// REP times out, or nothing at all (measured on Linux 6.1 with both
// libraries: no event in 200 s). Either way its destroy must not wait.
void run_a(Conn* a) {
  while (!(t_die.load() && since_die() > 1)) usleep(10000);
  rdma_conn_param p = conn_param("a");
  make_qp(*a);
  if (rdma_accept(a->id, &p)) {
    result("A", std::string("mid-handshake rdma_accept=") + std::strerror(errno), errno == ETIMEDOUT);
  } else {
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    ibv_query_qp(a->id->qp, &qa, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &qi);
    std::printf("A: accepted at t=%.1f (default QP timeout %u, retry_cnt %u)\n", since_die(),
                qa.timeout, qa.retry_cnt);
    std::fflush(stdout);
    rdma_cm_event* ev = next_event(a->ch, kHandshakeS * 1000);
    if (!ev) {
      result("A", "mid-handshake: no event for " + std::to_string(kHandshakeS) + " s", true);
    } else {
      result("A", "mid-handshake=" + event_text(ev),
             ev->event == RDMA_CM_EVENT_UNREACHABLE || ev->event == RDMA_CM_EVENT_CONNECT_ERROR);
      rdma_ack_cm_event(ev);
    }
  }
  timed_destroy(*a, "A");
}

sockaddr_in addr_of(const char* ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
    std::fprintf(stderr, "bad address %s\n", ip);
    std::exit(2);
  }
  return a;
}

const char* env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    std::fprintf(stderr, "peer_death: %s is not set\n", name);
    std::exit(2);
  }
  return v;
}

void destroy(Conn& c) {
  if (c.id && c.id->qp) rdma_destroy_qp(c.id);
  if (c.mr) ibv_dereg_mr(c.mr);
  if (c.id) rdma_destroy_id(c.id);
  if (c.ch) rdma_destroy_event_channel(c.ch);
}

int server(int port) {
  rdma_event_channel* lch = rdma_create_event_channel();
  if (!lch) die("rdma_create_event_channel");
  rdma_cm_id* listener;
  if (rdma_create_id(lch, &listener, nullptr, RDMA_PS_TCP)) die("rdma_create_id");
  sockaddr_in a = addr_of(env_or_die("RXE_IP"), port);
  open_notice(a, port);
  if (rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&a))) die("rdma_bind_addr");
  if (rdma_listen(listener, 8)) die("rdma_listen");
  std::printf("peer_death %s: listening on port %d\n", label, port);
  std::fflush(stdout);
  Conn conns[3];  // A, B, C
  std::vector<std::thread> threads;
  bool have[3] = {};
  double deadline = now() + 120;
  while (!(have[0] && have[1] && have[2])) {
    rdma_cm_event* ev = next_event(lch, 1000);
    if (!ev) {
      if (now() > deadline) {
        std::printf("peer_death %s: the client did not connect\n", label);
        return 2;
      }
      continue;
    }
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST || ev->param.conn.private_data_len < 1) {
      std::printf("peer_death %s: unexpected %s on the listener\n", label, event_text(ev).c_str());
      rdma_ack_cm_event(ev);
      return 2;
    }
    char tag = static_cast<const char*>(ev->param.conn.private_data)[0];
    rdma_cm_id* id = ev->id;
    rdma_ack_cm_event(ev);
    int i = tag - 'A';
    if (i < 0 || i > 2 || have[i]) {
      std::printf("peer_death %s: unexpected request %c\n", label, tag);
      return 2;
    }
    have[i] = true;
    Conn& c = conns[i];
    c.id = id;
    if (!(c.ch = rdma_create_event_channel())) die("rdma_create_event_channel");
    if (rdma_migrate_id(id, c.ch)) die("rdma_migrate_id");
    if (tag == 'A') continue;  // held: accepted only after the death
    // The ack timeout an application that wants to notice a dead peer sets:
    // 14 (4.096 us * 2^14 = 67 ms, 8 tries: ~0.5 s). Without it the QP
    // takes the path's (printed below) and a send to a dead host may wait
    // far longer.
    uint8_t ack = 14;
    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack, sizeof(ack)))
      die("rdma_set_option(ACK_TIMEOUT)");
    make_qp(c);
    rdma_conn_param p = conn_param(&tag);
    if (rdma_accept(id, &p)) die("rdma_accept");
    rdma_cm_event* est = next_event(c.ch, 20000);
    if (!est || est->event != RDMA_CM_EVENT_ESTABLISHED) {
      std::printf("peer_death %s: %c not established: %s\n", label, tag,
                  est ? event_text(est).c_str() : "no event");
      return 2;
    }
    rdma_ack_cm_event(est);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    ibv_query_qp(id->qp, &qa, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY, &qi);
    std::printf("peer_death %s: %c established (QP timeout %u, retry_cnt %u, rnr_retry %u)\n",
                label, tag, qa.timeout, qa.retry_cnt, qa.rnr_retry);
    std::fflush(stdout);
    if (tag == 'C') threads.emplace_back(run_c, &conns[2]);
  }
  threads.emplace_back(run_b, &conns[1]);
  threads.emplace_back(run_a, &conns[0]);
  for (auto& t : threads) t.join();
  for (auto& c : conns) destroy(c);
  rdma_destroy_id(listener);
  rdma_destroy_event_channel(lch);
  std::printf("peer_death %s: %d failure(s)\n", label, failures.load());
  return failures ? 1 : 0;
}

// Connects one id to the server with private data tag; QP unless bare.
Conn connect_one(const sockaddr_in& dst, char tag, bool wait_established) {
  Conn c;
  if (!(c.ch = rdma_create_event_channel())) die("rdma_create_event_channel");
  if (rdma_create_id(c.ch, &c.id, nullptr, RDMA_PS_TCP)) die("rdma_create_id");
  sockaddr_in d = dst;
  if (rdma_resolve_addr(c.id, nullptr, reinterpret_cast<sockaddr*>(&d), 5000))
    die("rdma_resolve_addr");
  rdma_cm_event* ev = next_event(c.ch, 10000);
  if (!ev || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) die("address resolution");
  rdma_ack_cm_event(ev);
  if (rdma_resolve_route(c.id, 5000)) die("rdma_resolve_route");
  ev = next_event(c.ch, 10000);
  if (!ev || ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED) die("route resolution");
  rdma_ack_cm_event(ev);
  make_qp(c);
  if (tag == 'C')
    for (int i = 0; i < kDepth; ++i)
      if (!post(c, i, false)) die("post recv");
  rdma_conn_param p = conn_param(&tag);
  if (rdma_connect(c.id, &p)) die("rdma_connect");
  if (!wait_established) return c;  // its reply is never read: no RTU
  ev = next_event(c.ch, 20000);
  if (!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED) die("connect");
  rdma_ack_cm_event(ev);
  return c;
}

int client(int port, bool handshake_only) {
  sockaddr_in dst = addr_of(env_or_die("RXE_PEER_IP"), port);
  if (handshake_only) {
    Conn a = connect_one(dst, 'A', false);
    std::printf("peer_death: request sent to port %d; going silent\n", port);
    std::fflush(stdout);
    pause();
  }
  Conn b = connect_one(dst, 'B', true);
  Conn c = connect_one(dst, 'C', true);
  Conn a = connect_one(dst, 'A', false);
  std::printf("peer_death: B and C established, A requested (port %d)\n", port);
  std::fflush(stdout);
  ibv_wc wc;
  for (;;) {  // C's receiver, until the host dies
    int n = ibv_poll_cq(c.id->recv_cq, 1, &wc);
    if (n < 0) die("ibv_poll_cq");
    if (n == 0) {
      usleep(100);
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) {
      std::printf("peer_death client: %s\n", ibv_wc_status_str(wc.status));
      return 1;
    }
    if (!post(c, static_cast<int>(wc.wr_id), false)) die("post recv");
  }
}

// Address and route resolve (the neighbour entry is static), the REQ goes out
// and is never answered: RDMA_CM_EVENT_UNREACHABLE (-ETIMEDOUT) after the
// CM's retries.
int unreachable(const char* ip) {
  label = "unreachable";
  t_die = now();
  sockaddr_in dst = addr_of(ip, 7999);
  Conn c = connect_one(dst, 'U', false);
  rdma_cm_event* ev = next_event(c.ch, kCmBoundS * 1000);
  if (!ev) {
    result("connect", "no event within " + std::to_string(kCmBoundS) + " s", false);
  } else {
    result("connect", "event=" + event_text(ev), ev->event == RDMA_CM_EVENT_UNREACHABLE);
    rdma_ack_cm_event(ev);
  }
  destroy(c);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: peer_death server PORT LABEL | client PORT | handshake PORT\n");
    return 2;
  }
  std::string mode = argv[1];
  int port = mode == "unreachable" ? 1 : std::atoi(argv[2]);
  if (port <= 0 || port > 65535) {
    std::fprintf(stderr, "peer_death: bad port %s\n", argv[2]);
    return 2;
  }
  if (mode == "server") {
    label = argc > 3 ? argv[3] : "ours";
    return server(port);
  }
  if (mode == "unreachable") return unreachable(argv[2]);
  label = "client";
  if (mode == "client") return client(port, false);
  if (mode == "handshake") return client(port, true);
  std::fprintf(stderr, "peer_death: unknown mode %s\n", mode.c_str());
  return 2;
}
