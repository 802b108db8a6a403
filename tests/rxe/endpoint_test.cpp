// The synchronous endpoint API (rdma_getaddrinfo, rdma_create_ep,
// rdma_get_request) with real traffic through every rdma_verbs.h wrapper:
// scatter/gather sends and receives, RDMA write and read, blocking
// completions through the channels the library created, and endpoints
// whose QPs receive through a shared receive queue.
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <netdb.h>

#include <thread>

#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

constexpr const char* kPort = "20886";

// What the server tells the client about its RDMA buffer.
struct Window {
  uint64_t addr;
  uint32_t write_rkey;  // from rdma_reg_write
  uint32_t read_rkey;   // from rdma_reg_read
  char greeting[16];
};

ibv_qp_init_attr ep_qp_attr() {
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 2;
  attr.sq_sig_all = 1;
  return attr;
}

rdma_addrinfo* lookup(bool passive) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  rdma_addrinfo* res = nullptr;
  int ret = rdma_getaddrinfo(device_ip().c_str(), kPort, &hints, &res);
  EXPECT_EQ(ret, 0) << (ret == -1 ? strerror(errno) : gai_strerror(ret));
  return res;
}

// Told by the server thread once its rdma_listen has returned, or once it
// has given up before that: the client connects only to a listener (a
// connect before the listen is rejected, and a slow server thread under TCG
// or load must not make it so). The first word counts.
class Listening {
 public:
  void say(bool listening) {
    std::lock_guard lock(mutex_);
    if (told_) return;
    told_ = true;
    listening_ = listening;
    cv_.notify_all();
  }
  // Waits for the word (a hang is the watchdog's); true if it listens.
  bool wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return told_; });
    return listening_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool told_ = false;
  bool listening_ = false;
};

// Runs a server in a thread; the client goes on once it listens.
class Server {
 public:
  explicit Server(void (*serve)(std::string*, Listening*))
      : thread_([state = state_, serve] {
          serve(&state->failure, &state->listening);
          state->listening.say(false);  // returned before it listened: a failure
        }) {}
  // After a failed assertion of the client's the server may wait for ever
  // (in rdma_get_request): let it, with what it uses, rather than hang here.
  ~Server() {
    if (thread_.joinable()) thread_.detach();
  }
  // True once the server listens; false (after joining it) if it failed first.
  bool listening() {
    if (state_->listening.wait()) return true;
    thread_.join();
    return false;
  }
  // The server's failure ("" if none), once it has finished.
  std::string failure() {
    if (thread_.joinable()) thread_.join();
    return state_->failure;
  }

 private:
  struct State {
    std::string failure;
    Listening listening;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::thread thread_;  // after state_: starts once that is made
};

void serve(std::string* failure, Listening* listening) {
  auto fail = [&](const char* what) { *failure = std::string(what) + ": " + strerror(errno); };
  rdma_addrinfo* res = lookup(true);
  if (!res) return fail("rdma_getaddrinfo");
  rdma_cm_id* listener = nullptr;
  ibv_qp_init_attr attr = ep_qp_attr();
  int ret = rdma_create_ep(&listener, res, nullptr, &attr);
  rdma_freeaddrinfo(res);
  if (ret) return fail("rdma_create_ep");
  if (rdma_listen(listener, 1)) return fail("rdma_listen");
  listening->say(true);
  rdma_cm_id* id = nullptr;
  if (rdma_get_request(listener, &id)) return fail("rdma_get_request");
  if (!id->qp) return fail("no QP from the endpoint's attributes");

  // One message lands in two buffers (scatter), then a reply and a window.
  char head[8] = {}, tail[24] = {};
  ibv_mr* head_mr = rdma_reg_msgs(id, head, sizeof(head));
  ibv_mr* tail_mr = rdma_reg_msgs(id, tail, sizeof(tail));
  ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(head), sizeof(head), head_mr->lkey},
                    {reinterpret_cast<uintptr_t>(tail), sizeof(tail), tail_mr->lkey}};
  if (rdma_post_recvv(id, nullptr, sge, 2)) return fail("rdma_post_recvv");
  static char window[64] = "server memory, readable";
  ibv_mr* win_mr = rdma_reg_write(id, window, sizeof(window));
  ibv_mr* rd_mr = rdma_reg_read(id, window, sizeof(window));
  if (!win_mr || !rd_mr) return fail("rdma_reg_write/read");
  if (rdma_accept(id, nullptr)) return fail("rdma_accept");

  ibv_wc wc;
  if (rdma_get_recv_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
    return fail("receive");
  if (std::string(head, 8) + std::string(tail) != "scatter/gather works")
    *failure = "received '" + std::string(head, 8) + std::string(tail) + "'";

  Window w{reinterpret_cast<uintptr_t>(window), win_mr->rkey, rd_mr->rkey, "hello client"};
  static_assert(sizeof(w) <= 64);
  ibv_mr* w_mr = rdma_reg_msgs(id, &w, sizeof(w));
  if (rdma_post_send(id, nullptr, &w, sizeof(w), w_mr, 0)) return fail("rdma_post_send");
  if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS) return fail("send");

  // The client writes into the window, then tells us; we check it.
  char done[4];
  ibv_mr* done_mr = rdma_reg_msgs(id, done, sizeof(done));
  if (rdma_post_recv(id, nullptr, done, sizeof(done), done_mr)) return fail("post_recv");
  int n = rdma_get_recv_comp(id, &wc);
  if (n != 1 || wc.status != IBV_WC_SUCCESS) {
    *failure = "notice: got " + std::to_string(n) + " completions, status " +
               ibv_wc_status_str(wc.status) + ", opcode " + std::to_string(wc.opcode);
    return;
  }
  if (std::string(window) != "written by the client")
    *failure = "window holds '" + std::string(window) + "'";

  rdma_disconnect(id);
  for (ibv_mr* mr : {head_mr, tail_mr, win_mr, rd_mr, w_mr, done_mr}) rdma_dereg_mr(mr);
  rdma_destroy_ep(id);
  rdma_destroy_ep(listener);
}

TEST(Endpoint, SynchronousClientServerWithEveryWrapper) {
  Server server(serve);
  ASSERT_TRUE(server.listening()) << server.failure();

  rdma_addrinfo* res = lookup(false);
  ASSERT_NE(res, nullptr);
  rdma_cm_id* id = nullptr;
  ibv_qp_init_attr attr = ep_qp_attr();
  ASSERT_EQ(rdma_create_ep(&id, res, nullptr, &attr), 0) << strerror(errno);
  rdma_freeaddrinfo(res);
  ASSERT_NE(id->qp, nullptr);
  EXPECT_EQ(id->channel != nullptr, true) << "endpoints are synchronous ids";

  Window w{};
  ibv_mr* w_mr = rdma_reg_msgs(id, &w, sizeof(w));
  ASSERT_EQ(rdma_post_recv(id, nullptr, &w, sizeof(w), w_mr), 0);
  ASSERT_EQ(rdma_connect(id, nullptr), 0) << strerror(errno);

  char part1[] = "scatter/";
  char part2[] = "gather works";
  ibv_mr* mr1 = rdma_reg_msgs(id, part1, sizeof(part1));
  ibv_mr* mr2 = rdma_reg_msgs(id, part2, sizeof(part2));
  ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(part1), 8, mr1->lkey},
                    {reinterpret_cast<uintptr_t>(part2), sizeof(part2), mr2->lkey}};
  ASSERT_EQ(rdma_post_sendv(id, nullptr, sge, 2, 0), 0);
  ibv_wc wc;
  ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_EQ(rdma_get_recv_comp(id, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(w.greeting, "hello client");

  // RDMA read of the server's window, then an RDMA write into it.
  char readback[64] = {};
  ibv_mr* rb_mr = rdma_reg_msgs(id, readback, sizeof(readback));
  ASSERT_EQ(rdma_post_read(id, nullptr, readback, sizeof(readback), rb_mr, 0, w.addr, w.read_rkey), 0);
  ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_STREQ(readback, "server memory, readable");
  char text[] = "written by the client";
  ibv_mr* t_mr = rdma_reg_msgs(id, text, sizeof(text));
  ASSERT_EQ(rdma_post_write(id, nullptr, text, sizeof(text), t_mr, 0, w.addr, w.write_rkey), 0);
  ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  char done[4] = "ok";
  ibv_mr* d_mr = rdma_reg_msgs(id, done, sizeof(done));
  ASSERT_EQ(rdma_post_send(id, nullptr, done, sizeof(done), d_mr, 0), 0);
  ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);

  // Both sides disconnect; each synchronous call returns once the other's
  // half of the exchange arrived.
  EXPECT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  EXPECT_EQ(server.failure(), "");
  for (ibv_mr* mr : {w_mr, mr1, mr2, rb_mr, t_mr, d_mr}) rdma_dereg_mr(mr);
  rdma_destroy_ep(id);
}

// Endpoints with shared receive queues: each side makes its endpoint without
// QP attributes (the passive one through rdma_get_request), then
// rdma_create_srq and rdma_create_qp, so the QP takes its receives from the
// id's SRQ and rdma_post_recv posts there. rdma_destroy_ep destroys the SRQ
// with the QP, as rdma-core's does: the server's own PD can be freed after.
constexpr const char* kSrqPort = "20887";

ibv_qp_init_attr srq_qp_attr() {
  ibv_qp_init_attr attr{};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;  // receive CQ size; the SRQ holds the WRs
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.sq_sig_all = 1;
  return attr;
}

ibv_srq_init_attr srq_attr() {
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = 4;
  attr.attr.max_sge = 1;
  return attr;
}

rdma_addrinfo* lookup_at(const char* port, bool passive) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  rdma_addrinfo* res = nullptr;
  int ret = rdma_getaddrinfo(device_ip().c_str(), port, &hints, &res);
  EXPECT_EQ(ret, 0) << (ret == -1 ? strerror(errno) : gai_strerror(ret));
  return res;
}

void serve_with_srq(std::string* failure, Listening* listening) {
  auto fail = [&](const std::string& what) { *failure = what + ": " + strerror(errno); };
  rdma_addrinfo* res = lookup_at(kSrqPort, true);
  if (!res) return fail("rdma_getaddrinfo");
  rdma_cm_id* listener = nullptr;
  int ret = rdma_create_ep(&listener, res, nullptr, nullptr);
  rdma_freeaddrinfo(res);
  if (ret) return fail("rdma_create_ep");
  if (rdma_listen(listener, 1)) return fail("rdma_listen");
  listening->say(true);
  rdma_cm_id* id = nullptr;
  if (rdma_get_request(listener, &id)) return fail("rdma_get_request");
  if (id->qp) return fail("a QP without QP attributes");

  ibv_pd* pd = ibv_alloc_pd(id->verbs);
  if (!pd) return fail("ibv_alloc_pd");
  ibv_srq_init_attr sa = srq_attr();
  if (rdma_create_srq(id, pd, &sa)) return fail("rdma_create_srq");
  if (!id->srq || id->srq->pd != pd) return fail("no SRQ on the id's PD");
  ibv_qp_init_attr qa = srq_qp_attr();
  if (rdma_create_qp(id, pd, &qa)) return fail("rdma_create_qp");
  if (id->qp->srq != id->srq) return fail("the QP does not use the id's SRQ");
  if (id->pd != pd) return fail("the id's PD is not the QP's");

  // Two receives in the SRQ; two messages arrive through the QP.
  char in[2][16] = {};
  ibv_mr* in_mr = rdma_reg_msgs(id, in, sizeof(in));
  if (!in_mr) return fail("rdma_reg_msgs");
  for (auto& buf : in)
    if (rdma_post_recv(id, buf, buf, sizeof(buf), in_mr)) return fail("rdma_post_recv");
  if (rdma_accept(id, nullptr)) return fail("rdma_accept");
  ibv_wc wc;
  for (int i = 0; i < 2; ++i) {
    if (rdma_get_recv_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS) return fail("receive");
    if (wc.qp_num != id->qp->qp_num) *failure = "a completion for another QP";
    if (wc.wr_id != reinterpret_cast<uintptr_t>(in[i])) *failure = "receives out of order";
  }
  if (std::string(in[0]) != "first" || std::string(in[1]) != "second")
    *failure = "received '" + std::string(in[0]) + "', '" + std::string(in[1]) + "'";

  char reply[] = "both, via SRQ";
  ibv_mr* reply_mr = rdma_reg_msgs(id, reply, sizeof(reply));
  if (rdma_post_send(id, nullptr, reply, sizeof(reply), reply_mr, 0)) return fail("rdma_post_send");
  if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS) return fail("send");
  if (rdma_post_recv(id, nullptr, in[0], sizeof(in[0]), in_mr) || rdma_get_recv_comp(id, &wc) != 1)
    return fail("the client's last word");

  rdma_disconnect(id);
  rdma_dereg_mr(in_mr);
  rdma_dereg_mr(reply_mr);
  if (ibv_dealloc_pd(pd) != EBUSY) *failure = "the PD was free while its SRQ and QP lived";
  rdma_destroy_ep(id);
  if (int err = ibv_dealloc_pd(pd))
    *failure = std::string("rdma_destroy_ep left the SRQ (or QP) on the PD: ") + strerror(err);
  rdma_destroy_ep(listener);
}

TEST(Endpoint, SharedReceiveQueues) {
  Server server(serve_with_srq);
  ASSERT_TRUE(server.listening()) << server.failure();

  rdma_addrinfo* res = lookup_at(kSrqPort, false);
  ASSERT_NE(res, nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_ep(&id, res, nullptr, nullptr), 0) << strerror(errno);
  rdma_freeaddrinfo(res);
  EXPECT_EQ(id->qp, nullptr);
  ibv_srq_init_attr sa = srq_attr();
  ASSERT_EQ(rdma_create_srq(id, nullptr, &sa), 0) << strerror(errno);
  ASSERT_NE(id->srq, nullptr);
  EXPECT_EQ(id->srq->pd, id->pd) << "the id's PD when none is given";
  if (!reference()) {  // rdma-core makes a second SRQ and loses the first
    errno = 0;
    EXPECT_EQ(rdma_create_srq(id, nullptr, &sa), -1) << "one SRQ per id";
    EXPECT_EQ(errno, EINVAL);
  }
  ibv_qp_init_attr qa = srq_qp_attr();
  ASSERT_EQ(rdma_create_qp(id, nullptr, &qa), 0) << strerror(errno);
  EXPECT_EQ(id->qp->srq, id->srq);

  char reply[32] = {};
  ibv_mr* reply_mr = rdma_reg_msgs(id, reply, sizeof(reply));
  ASSERT_EQ(rdma_post_recv(id, nullptr, reply, sizeof(reply), reply_mr), 0) << "into the SRQ";
  ASSERT_EQ(rdma_connect(id, nullptr), 0) << strerror(errno);
  char out[2][16] = {"first", "second"};
  ibv_mr* out_mr = rdma_reg_msgs(id, out, sizeof(out));
  ibv_wc wc;
  for (auto& msg : out) {
    ASSERT_EQ(rdma_post_send(id, nullptr, msg, sizeof(msg), out_mr, 0), 0);
    ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  }
  ASSERT_EQ(rdma_get_recv_comp(id, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.qp_num, id->qp->qp_num);
  EXPECT_EQ(wc.byte_len, sizeof("both, via SRQ"));
  EXPECT_STREQ(reply, "both, via SRQ");
  std::strcpy(out[0], "ok");
  ASSERT_EQ(rdma_post_send(id, nullptr, out[0], 3, out_mr, 0), 0);
  ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);

  EXPECT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  EXPECT_EQ(server.failure(), "");
  rdma_dereg_mr(reply_mr);
  rdma_dereg_mr(out_mr);
  rdma_destroy_ep(id);  // QP, SRQ and id
}

TEST(Endpoint, MisuseFailsCleanly) {
  rdma_cm_id* id = nullptr;
  if (!reference()) {  // rdma-core dereferences the NULL rdma_addrinfo
    errno = 0;
    EXPECT_EQ(rdma_create_ep(&id, nullptr, nullptr, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
  }
  // rdma_get_request needs a synchronous listener.
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* async = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &async, nullptr, RDMA_PS_TCP), 0);
  errno = 0;
  EXPECT_EQ(rdma_get_request(async, &id), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(async), 0);
  rdma_destroy_event_channel(ch);
}

}  // namespace
}  // namespace rdmacm::rxe
