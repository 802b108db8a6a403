// rdma_set_option through the kernel, IPv6 link-local addressing with scope
// ids, and concurrent use of a channel from several threads.
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <poll.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "cm_helpers.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {


class Options : public ::testing::Test {
 protected:
  void SetUp() override {
    ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr);
  }
  void TearDown() override {
    for (rdma_cm_id* id : ids) EXPECT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
  }
  rdma_cm_id* make(rdma_port_space ps = RDMA_PS_TCP) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, ps), 0) << strerror(errno);
    if (id) ids.push_back(id);
    return id;
  }
  rdma_event_channel* ch = nullptr;
  std::vector<rdma_cm_id*> ids;
};

TEST_F(Options, TypeOfService) {
  rdma_cm_id* id = make();
  uint8_t tos = 32;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)), 0)
      << strerror(errno);
  int wrong = 32;
  errno = 0;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &wrong, sizeof(wrong)), -1);
  EXPECT_EQ(errno, EINVAL);
  // The ToS reaches the route: resolution still works.
  sockaddr_in dst = device_addr(7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(&dst), 2000), 0);
  EXPECT_TRUE(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  EXPECT_TRUE(expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
}

TEST_F(Options, ReuseAddrLetsTwoIdsShareAPort) {
  rdma_cm_id* a = make();
  rdma_cm_id* b = make();
  int on = 1;
  ASSERT_EQ(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on)), 0)
      << strerror(errno);
  ASSERT_EQ(rdma_set_option(b, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on)), 0);
  sockaddr_in addr = device_addr(20001);
  ASSERT_EQ(rdma_bind_addr(a, sa(&addr)), 0) << strerror(errno);
  EXPECT_EQ(rdma_bind_addr(b, sa(&addr)), 0) << strerror(errno);
}

TEST_F(Options, AfOnlyKeepsIpv6WildcardOffIpv4) {
  rdma_cm_id* v6 = make();
  rdma_cm_id* v4 = make();
  int on = 1;
  ASSERT_EQ(rdma_set_option(v6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof(on)), 0)
      << strerror(errno);
  sockaddr_in6 any6{};
  any6.sin6_family = AF_INET6;
  any6.sin6_port = htons(20002);
  ASSERT_EQ(rdma_bind_addr(v6, sa(&any6)), 0) << strerror(errno);
  sockaddr_in any4{};
  any4.sin_family = AF_INET;
  any4.sin_port = htons(20002);
  EXPECT_EQ(rdma_bind_addr(v4, sa(&any4)), 0) << strerror(errno);

  // Without AFONLY the IPv6 wildcard also takes the IPv4 port (the kernel
  // reports this conflict as EADDRNOTAVAIL, an exact one as EADDRINUSE).
  rdma_cm_id* dual = make();
  rdma_cm_id* v4b = make();
  any6.sin6_port = htons(20003);
  any4.sin_port = htons(20003);
  ASSERT_EQ(rdma_bind_addr(dual, sa(&any6)), 0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(v4b, sa(&any4)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
}

TEST_F(Options, AckTimeoutAndUnknownOptions) {
  rdma_cm_id* id = make();
  uint8_t timeout = 14;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                            sizeof(timeout)),
            0)
      << strerror(errno);
  int value = 0;
  errno = 0;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, 99, &value, sizeof(value)), -1);
  EXPECT_EQ(errno, ENOSYS);
  errno = 0;
  EXPECT_EQ(rdma_set_option(id, 42, 0, &value, sizeof(value)), -1);
  EXPECT_EQ(errno, ENOSYS);
}

TEST_F(Options, IbPathNeedsWholePathRecords) {
  rdma_cm_id* id = make();
  sockaddr_in dst = device_addr(7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(&dst), 2000), 0);
  ASSERT_TRUE(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
  uint8_t partial[10] = {};
  errno = 0;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, partial, sizeof(partial)),
            -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(Options, NullIdIsRefused) {
  if (reference()) GTEST_SKIP() << "rdma-core dereferences the NULL id";
  int on = 1;
  errno = 0;
  EXPECT_EQ(rdma_set_option(nullptr, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on)),
            -1);
  EXPECT_EQ(errno, EINVAL);
}

// A length without a value: the kernel answers rdma-core EFAULT; so does ours.
TEST_F(Options, NullValueGivesTheKernelsEfault) {
  rdma_cm_id* id = make();
  errno = 0;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, nullptr, sizeof(int)),
            -1);
  EXPECT_EQ(errno, EFAULT);
}

TEST(Ipv6, LinkLocalConnectWithScopeId) {
  sockaddr_in6 local = device_addr6(0);
  if (local.sin6_family != AF_INET6) GTEST_SKIP() << "no IPv6 link-local address on the netdev";
  ASSERT_NE(local.sin6_scope_id, 0u);
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* client = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(ch, &client, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_bind_addr(listener, sa(&local)), 0) << strerror(errno);
  ASSERT_NE(listener->verbs, nullptr) << "a link-local address with scope binds the device";
  ASSERT_EQ(rdma_listen(listener, 1), 0);
  sockaddr_in6 dst = local;
  dst.sin6_port = rdma_get_src_port(listener);
  ASSERT_EQ(rdma_resolve_addr(client, nullptr, sa(&dst), 2000), 0) << strerror(errno);
  ASSERT_TRUE(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
  auto* src = reinterpret_cast<sockaddr_in6*>(rdma_get_local_addr(client));
  EXPECT_EQ(src->sin6_family, AF_INET6);
  EXPECT_TRUE(IN6_IS_ADDR_LINKLOCAL(&src->sin6_addr));
  ASSERT_EQ(rdma_resolve_route(client, 2000), 0);
  ASSERT_TRUE(expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
  rdma_conn_param cp{};
  cp.qp_num = 7;
  ASSERT_EQ(rdma_connect(client, &cp), 0) << strerror(errno);
  rdma_cm_event* req = nullptr;
  ASSERT_TRUE(next_event_is(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &req));
  auto* peer = reinterpret_cast<sockaddr_in6*>(rdma_get_peer_addr(req->id));
  EXPECT_EQ(peer->sin6_family, AF_INET6);
  EXPECT_EQ(memcmp(&peer->sin6_addr, &local.sin6_addr, 16), 0);
  EXPECT_EQ(rdma_reject(req->id, nullptr, 0), 0);
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  EXPECT_TRUE(expect_event(ch, RDMA_CM_EVENT_REJECTED));
  EXPECT_EQ(rdma_destroy_id(child), 0);
  EXPECT_EQ(rdma_destroy_id(client), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  rdma_destroy_event_channel(ch);
}

TEST(Threads, DestroyWhileAnotherThreadWaitsOnTheChannel) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* waiter_id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &waiter_id, nullptr, RDMA_PS_TCP), 0);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    rdma_cm_event* ev = nullptr;
    // Blocks in the kernel until the resolution below completes.
    if (rdma_get_cm_event(ch, &ev) == 0) {
      got = ev->id == waiter_id && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED;
      rdma_ack_cm_event(ev);
    }
  });
  // Meanwhile other ids on the same channel come and go.
  for (int i = 0; i < 20; ++i) {
    rdma_cm_id* tmp = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &tmp, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in addr = device_addr(0);
    ASSERT_EQ(rdma_bind_addr(tmp, sa(&addr)), 0);
    ASSERT_EQ(rdma_destroy_id(tmp), 0);
  }
  sockaddr_in dst = device_addr(7471);
  ASSERT_EQ(rdma_resolve_addr(waiter_id, nullptr, sa(&dst), 2000), 0);
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(rdma_destroy_id(waiter_id), 0);
  rdma_destroy_event_channel(ch);
}

TEST(Threads, ChannelsServeDifferentThreadsConcurrently) {
  constexpr int kThreads = 4;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      rdma_event_channel* ch = rdma_create_event_channel();
      if (!ch) return;
      for (int i = 0; i < 10; ++i) {
        rdma_cm_id* id = nullptr;
        if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) break;
        sockaddr_in dst = device_addr(7471);
        bool resolved = rdma_resolve_addr(id, nullptr, sa(&dst), 2000) == 0 &&
                        expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
        if (rdma_destroy_id(id) == 0 && resolved) ++ok;
      }
      rdma_destroy_event_channel(ch);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, kThreads * 10);
}

}  // namespace
}  // namespace rdmacm::rxe
