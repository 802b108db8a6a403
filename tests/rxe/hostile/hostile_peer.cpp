// hostile_peer: an rsocket stream client written on rdma-core's librdmacm and
// libibverbs directly (the system's headers and library, never ours), which
// does the rsocket handshake exactly as rdma-core 44's rsocket.c does, then
// misbehaves in one way. hostile_server (the rsocket program under test)
// starts it and talks to it over its stdin/stdout, one line at a time:
//
//   peer -> server  "connected credits=C window=W lib=PATH"   (stream modes)
//                   "hello"            64 bytes of 'h' sent as one legal DATA
//   server -> peer  "go"               (after the server saw the hello arrive)
//   peer -> server  "violated status=S ..."  (the violation's send completed)
//   server -> peer  "exit"             (or EOF): destroy everything and leave
//
//   halfopen:       "requested port=P lib=PATH", then waits for "exit"
//
// Modes (tests/rxe/hostile/README.md):
//   credits   more DATA messages than the credits granted
//   window    a DATA whose length runs past the receive window granted
//             (data_buf and every SGE granted since; 1 byte written)
//   zero      a DATA of length 0
//   noimm     a completion without immediate data (a SEND of 0 bytes)
//   badop     a reserved op (5, RS_OP_RSVD) in the immediate
//   badrecv   a SEND with a payload (rsocket receives have no buffer: the
//             server's receive fails)
//   halfopen  the REQ with a valid ConnData, then never the RTU: the id has
//             no QP (rdma_connect with qp_num of a QP of our own), and no
//             rdma_get_cm_event is ever called, so the kernel holds the REP
//             and never answers it.
// The wire format is written here from rdma-core 44's librdmacm/rsocket.c,
// not taken from our src/rsocket/protocol.h: a peer of its own.
#include <arpa/inet.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

// rdma-core 44 rsocket.c: struct rs_sge, struct rs_conn_data, the ops.
struct RsSge {
  uint64_t addr;
  uint32_t key;
  uint32_t length;
};
struct RsConnData {
  uint8_t version;
  uint8_t flags;
  uint16_t credits;  // be16
  uint8_t reserved[3];
  uint8_t target_iomap_size;
  RsSge target_sgl;  // be
  RsSge data_buf;    // be
};
static_assert(sizeof(RsSge) == 16 && sizeof(RsConnData) == 40, "rdma-core 44 layout");
constexpr uint32_t kOpData = 0, kOpSgl = 4, kOpReserved = 5, kOpCtrl = 7;
constexpr uint8_t kConnFlagIomap = 1 << 1;
constexpr uint32_t msg(uint32_t op, uint32_t data) { return op << 29 | (data & 0x1FFFFFFF); }
constexpr int kRecvs = 64;          // our receive queue: the credits we grant
constexpr uint32_t kRbuf = 1 << 17;  // our receive buffer (the server writes into its first half)
constexpr uint32_t kSbuf = 1 << 17;
constexpr uint32_t kHello = 64;

[[noreturn]] void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hostile_peer: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));
  va_end(ap);
  exit(2);
}

void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

// A line from the server on stdin within `ms`; "" on EOF or timeout.
std::string hear(int ms) {
  std::string line;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    until - std::chrono::steady_clock::now()).count());
    if (left <= 0) return "";
    pollfd p{0, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) continue;
    char c;
    if (read(0, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line += c;
  }
}

// Which librdmacm this process runs on (the server checks it is rdma-core's).
std::string rdmacm_path() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto at = line.find('/');
    if (at != std::string::npos && line.find("librdmacm", at) != std::string::npos)
      return line.substr(at);
  }
  return "?";
}

rdma_cm_event* expect_event(rdma_event_channel* ch, rdma_cm_event_type want) {
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e)) die("rdma_get_cm_event");
  if (e->event != want)
    die("got %s (status %d), wanted %s", rdma_event_str(e->event), e->status, rdma_event_str(want));
  return e;
}

struct Peer {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  char* rbuf = nullptr;
  char* sbuf = nullptr;
  RsSge* target = nullptr;  // where the server writes its window grants
  ibv_mr *rmr = nullptr, *smr = nullptr, *tmr = nullptr;
  // What the server granted: its credits (sequence number limit) and window.
  uint16_t sseq_no = 0, sseq_comp = 0;
  RsSge window{};
  uint32_t window_used = 0;
  // Bytes of receive window granted in all: data_buf, then each SGE the
  // server writes into our target SGL (entry 1 first, then 0, 1, ...).
  uint64_t granted_bytes = 0;
  int next_target = 1;
  int sends_out = 0;

  void resolve(const char* host, const char* port) {
    ch = rdma_create_event_channel();
    if (!ch || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) die("rdma_create_id");
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res)) die("getaddrinfo %s", host);
    if (rdma_resolve_addr(id, nullptr, res->ai_addr, 2000)) die("rdma_resolve_addr");
    freeaddrinfo(res);
    rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(id, 2000)) die("rdma_resolve_route");
    rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
  }

  // CQ, QP (attached to the id, or not: half-open), buffers and receives.
  void resources(bool attach) {
    pd = ibv_alloc_pd(id->verbs);
    cq = ibv_create_cq(id->verbs, 1024, nullptr, nullptr, 0);
    if (!pd || !cq) die("pd/cq");
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = 1;
    a.cap.max_send_wr = 512;
    a.cap.max_recv_wr = kRecvs;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    if (attach) {
      if (rdma_create_qp(id, pd, &a)) die("rdma_create_qp");
      qp = id->qp;
    } else {
      qp = ibv_create_qp(pd, &a);
      if (!qp) die("ibv_create_qp");
    }
    rbuf = static_cast<char*>(calloc(1, kRbuf));
    sbuf = static_cast<char*>(calloc(1, kSbuf));
    target = static_cast<RsSge*>(calloc(2, sizeof(RsSge)));
    int w = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    rmr = ibv_reg_mr(pd, rbuf, kRbuf, w);
    smr = ibv_reg_mr(pd, sbuf, kSbuf, IBV_ACCESS_LOCAL_WRITE);
    tmr = ibv_reg_mr(pd, target, 2 * sizeof(RsSge), w);
    if (!rmr || !smr || !tmr) die("ibv_reg_mr");
    if (attach)
      for (int i = 0; i < kRecvs; ++i) post_recv();
  }

  void post_recv() {
    ibv_recv_wr wr{}, *bad;
    wr.wr_id = 1ull << 63;  // rsocket's: a receive without buffer
    if (ibv_post_recv(qp, &wr, &bad)) die("ibv_post_recv");
  }

  RsConnData conn_data() const {
    RsConnData c{};
    c.version = 1;
    c.flags = kConnFlagIomap;  // as rdma-core 44 (a little-endian host)
    c.credits = htobe16(kRecvs);
    c.target_iomap_size = 0;
    c.target_sgl = {htobe64(reinterpret_cast<uintptr_t>(target)), htobe32(tmr->rkey), htobe32(2)};
    c.data_buf = {htobe64(reinterpret_cast<uintptr_t>(rbuf)), htobe32(rmr->rkey), htobe32(kRbuf / 2)};
    return c;
  }

  rdma_conn_param param(const RsConnData& c) const {
    rdma_conn_param p{};
    p.private_data = &c;
    p.private_data_len = sizeof(c);
    p.flow_control = 1;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    return p;
  }

  void connect() {
    RsConnData c = conn_data();
    rdma_conn_param p = param(c);
    if (rdma_connect(id, &p)) die("rdma_connect");
    rdma_cm_event* e = expect_event(ch, RDMA_CM_EVENT_ESTABLISHED);
    if (e->param.conn.private_data_len < sizeof(RsConnData)) die("short private data");
    RsConnData s;
    memcpy(&s, e->param.conn.private_data, sizeof(s));
    rdma_ack_cm_event(e);
    if (s.version != 1) die("server's ConnData version %d", s.version);
    sseq_comp = be16toh(s.credits);
    window = {be64toh(s.data_buf.addr), be32toh(s.data_buf.key), be32toh(s.data_buf.length)};
    granted_bytes = window.length;
  }

  // Takes completions for up to `ms`, until `sends_out` reaches `want_out`
  // (-1: just drain). Returns the status of the last failed send, or SUCCESS.
  ibv_wc_status poll(int want_out, int ms) {
    ibv_wc_status failed = IBV_WC_SUCCESS;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      ibv_wc wc[16];
      int n = ibv_poll_cq(cq, 16, wc);
      if (n < 0) die("ibv_poll_cq");
      for (int i = 0; i < n; ++i) {
        if (wc[i].wr_id >> 63) {  // a receive: the server's credits or control
          if (wc[i].status != IBV_WC_SUCCESS) continue;
          uint32_t m = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? be32toh(wc[i].imm_data) : 0;
          if (m >> 29 == kOpSgl) sseq_comp = static_cast<uint16_t>(m & 0x1FFFFFFF);
          if (m >> 29 == kOpSgl && wc[i].byte_len == sizeof(RsSge)) {  // a new window too
            granted_bytes += target[next_target].length;  // the server's (our) byte order
            next_target ^= 1;
          }
          if (m >> 29 == kOpSgl || m >> 29 == kOpCtrl) post_recv();
          continue;
        }
        --sends_out;
        if (wc[i].status != IBV_WC_SUCCESS) failed = wc[i].status;
      }
      if (want_out >= 0 && sends_out <= want_out) return failed;
      if (std::chrono::steady_clock::now() >= until) return failed;
      if (!n) usleep(1000);
    }
  }

  // One message: an RDMA write with immediate `imm` of `len` bytes of `fill`
  // at `offset` in the server's window, or a SEND (with_imm false).
  void post(ibv_wr_opcode op, uint32_t imm, uint32_t offset, uint32_t len, char fill) {
    memset(sbuf, fill, len);
    ibv_sge sge{reinterpret_cast<uintptr_t>(sbuf), len, smr->lkey};
    ibv_send_wr wr{}, *bad;
    wr.opcode = op;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.imm_data = htobe32(imm);
    wr.wr.rdma.remote_addr = window.addr + offset;
    wr.wr.rdma.rkey = window.key;
    if (ibv_post_send(qp, &wr, &bad)) die("ibv_post_send");
    ++sends_out;
  }
  void data(uint32_t len, char fill) {
    post(IBV_WR_RDMA_WRITE_WITH_IMM, msg(kOpData, len), window_used, len, fill);
    window_used += len;
    ++sseq_no;
  }
};

int stream(const std::string& mode, Peer& p) {
  p.resources(true);
  p.connect();
  say("connected credits=%u window=%u lib=%s", p.sseq_comp, p.window.length, rdmacm_path().c_str());
  p.data(kHello, 'h');
  if (p.poll(0, 10000) != IBV_WC_SUCCESS || p.sends_out) die("hello did not complete");
  say("hello");
  std::string go = hear(30000);
  if (go != "go") die("no go from the server (got '%s')", go.c_str());
  std::string detail;
  if (mode == "credits") {
    p.poll(-1, 200);  // take any credit update the server sent meanwhile
    int legal = static_cast<int16_t>(p.sseq_comp - p.sseq_no);
    for (int i = 0; i < legal; ++i) p.data(1, 'a');
    p.data(1, 'X');  // one past the credits granted
    detail = "legal=" + std::to_string(legal) + " granted=" + std::to_string(p.sseq_comp);
  } else if (mode == "window") {
    // A DATA whose length runs one byte past all the window granted so far
    // (data_buf and the SGEs since): 1 byte written, the length claimed.
    p.poll(-1, 200);  // take any window the server granted meanwhile
    uint32_t len = static_cast<uint32_t>(p.granted_bytes - p.window_used + 1);
    p.post(IBV_WR_RDMA_WRITE_WITH_IMM, msg(kOpData, len), p.window_used, 1, 'X');
    detail = "claimed=" + std::to_string(len) + " granted=" + std::to_string(p.granted_bytes);
  } else if (mode == "zero") {
    p.data(0, 'X');
  } else if (mode == "noimm") {
    p.post(IBV_WR_SEND, 0, 0, 0, 'X');
  } else if (mode == "badop") {
    p.post(IBV_WR_RDMA_WRITE_WITH_IMM, msg(kOpReserved, 1), p.window_used, 1, 'X');
  } else if (mode == "badrecv") {
    p.post(IBV_WR_SEND, 0, 0, 4, 'X');
  } else {
    die("unknown mode %s", mode.c_str());
  }
  ibv_wc_status st = p.poll(0, 10000);
  say("violated status=%s out=%d %s", ibv_wc_status_str(st), p.sends_out, detail.c_str());
  hear(60000);  // "exit" or EOF
  return 0;
}

int halfopen(Peer& p) {
  p.resources(false);
  RsConnData c = p.conn_data();
  rdma_conn_param prm = p.param(c);
  prm.qp_num = p.qp->qp_num;
  if (rdma_connect(p.id, &prm)) die("rdma_connect");
  say("requested port=%u lib=%s", ntohs(rdma_get_src_port(p.id)), rdmacm_path().c_str());
  hear(90000);  // never rdma_get_cm_event: the CONNECT_RESPONSE stays unanswered
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: hostile_peer MODE ADDR PORT\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string mode = argv[1];
  Peer p;
  p.resolve(argv[2], argv[3]);
  int rc = mode == "halfopen" ? halfopen(p) : stream(mode, p);
  // Leave without a disconnect: the kernel ends the connection as the
  // process's ids go (a DREQ, or a REJ for the half-open one).
  return rc;
}
