// The synchronous endpoint API (rdma_getaddrinfo, rdma_create_ep,
// rdma_get_request) with real traffic through every rdma_verbs.h wrapper:
// scatter/gather sends and receives, RDMA write and read, and blocking
// completions through the channels the library created.
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
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

void serve(std::string* failure) {
  auto fail = [&](const char* what) { *failure = std::string(what) + ": " + strerror(errno); };
  rdma_addrinfo* res = lookup(true);
  if (!res) return fail("rdma_getaddrinfo");
  rdma_cm_id* listener = nullptr;
  ibv_qp_init_attr attr = ep_qp_attr();
  int ret = rdma_create_ep(&listener, res, nullptr, &attr);
  rdma_freeaddrinfo(res);
  if (ret) return fail("rdma_create_ep");
  if (rdma_listen(listener, 1)) return fail("rdma_listen");
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
  std::string server_failure;
  std::thread server(serve, &server_failure);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let it listen

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
  server.join();
  EXPECT_EQ(server_failure, "");
  for (ibv_mr* mr : {w_mr, mr1, mr2, rb_mr, t_mr, d_mr}) rdma_dereg_mr(mr);
  rdma_destroy_ep(id);
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
