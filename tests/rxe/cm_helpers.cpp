#include "cm_helpers.h"

#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "../common/time_scale.h"
#include "rxe_env.h"

namespace rdmacm::rxe {

using namespace std::chrono_literals;

bool poll_one(ibv_cq* cq, ibv_wc* wc) {
  auto deadline = std::chrono::steady_clock::now() + test::scaled(5s);
  while (std::chrono::steady_clock::now() < deadline) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n) return n == 1;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

rdma_cm_event* wait_event(rdma_event_channel* ch, int timeout_ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return nullptr;
  rdma_cm_event* ev = nullptr;
  return rdma_get_cm_event(ch, &ev) ? nullptr : ev;
}

std::string describe(const rdma_cm_event* ev) {
  if (!ev) return "no event";
  return std::string(rdma_event_str(ev->event)) + " (status " + std::to_string(ev->status) + ")";
}

::testing::AssertionResult next_event_is(rdma_event_channel* ch, rdma_cm_event_type type,
                                         rdma_cm_event** out, int timeout_ms) {
  timeout_ms = test::scaled_ms(timeout_ms);
  rdma_cm_event* ev = wait_event(ch, timeout_ms);
  *out = ev;
  if (!ev)
    return ::testing::AssertionFailure()
           << "no event within " << timeout_ms << " ms, expected " << rdma_event_str(type);
  if (ev->event != type)
    return ::testing::AssertionFailure()
           << "got " << describe(ev) << ", expected " << rdma_event_str(type);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult expect_event(rdma_event_channel* ch, rdma_cm_event_type type,
                                        int timeout_ms) {
  rdma_cm_event* ev = nullptr;
  auto result = next_event_is(ch, type, &ev, timeout_ms);
  if (ev) rdma_ack_cm_event(ev);
  return result;
}

ibv_qp_init_attr rc_qp_attr(uint32_t depth) {
  ibv_qp_init_attr attr{};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = depth;
  attr.cap.max_recv_wr = depth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.sq_sig_all = 1;
  return attr;
}

bool Pair::setup(rdma_port_space ps) {
  server_ch = rdma_create_event_channel();
  client_ch = rdma_create_event_channel();
  EXPECT_TRUE(server_ch && client_ch) << strerror(errno);
  if (!server_ch || !client_ch) return false;
  EXPECT_EQ(rdma_create_id(server_ch, &listener, this, ps), 0) << strerror(errno);
  EXPECT_EQ(rdma_create_id(client_ch, &client, this, ps), 0) << strerror(errno);
  if (!listener || !client) return false;
  sockaddr_in addr = device_addr(0);
  EXPECT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&addr)), 0) << strerror(errno);
  EXPECT_EQ(rdma_listen(listener, 8), 0) << strerror(errno);
  addr.sin_port = rdma_get_src_port(listener);
  EXPECT_EQ(rdma_resolve_addr(client, nullptr, reinterpret_cast<sockaddr*>(&addr), 2000), 0)
      << strerror(errno);
  if (!expect_event(client_ch, RDMA_CM_EVENT_ADDR_RESOLVED)) {
    ADD_FAILURE() << "address resolution failed";
    return false;
  }
  EXPECT_EQ(rdma_resolve_route(client, 2000), 0) << strerror(errno);
  if (!expect_event(client_ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) {
    ADD_FAILURE() << "route resolution failed";
    return false;
  }
  return !::testing::Test::HasFailure();
}

void Pair::teardown() {
  for (rdma_cm_id** id : {&server, &client, &listener}) {
    if (!*id) continue;
    if ((*id)->qp) rdma_destroy_qp(*id);
    EXPECT_EQ(rdma_destroy_id(*id), 0) << strerror(errno);
    *id = nullptr;
  }
  if (server_ch) rdma_destroy_event_channel(server_ch);
  if (client_ch) rdma_destroy_event_channel(client_ch);
  server_ch = client_ch = nullptr;
}

}  // namespace rdmacm::rxe
