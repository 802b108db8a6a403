// Identifiers: creation, destruction, binding and resolution, with the fake
// kernel. Misuse must fail with the documented errno and leak nothing.
#include "fixture.h"

#include <vector>

namespace rdmacm::testing {
namespace {

TEST_F(CmTest, CreateIdSetsDefaultsPerPortSpace) {
  struct Case {
    rdma_port_space ps;
    ibv_qp_type qp_type;
  } cases[] = {{RDMA_PS_TCP, IBV_QPT_RC},
               {RDMA_PS_IB, IBV_QPT_RC},
               {RDMA_PS_UDP, IBV_QPT_UD},
               {RDMA_PS_IPOIB, IBV_QPT_UD}};
  for (const Case& c : cases) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(channel, &id, this, c.ps), 0);
    EXPECT_EQ(id->ps, c.ps);
    EXPECT_EQ(id->qp_type, c.qp_type);
    EXPECT_EQ(id->channel, channel);
    EXPECT_EQ(id->context, this);
    EXPECT_EQ(id->verbs, nullptr);
    EXPECT_EQ(id->qp, nullptr);
    EXPECT_EQ(rdma_destroy_id(id), 0);
  }
  EXPECT_EQ(fake.live_ids(), 0u);
}

TEST_F(CmTest, CreateIdRejectsBadArguments) {
  rdma_cm_id* id = nullptr;
  EXPECT_FAILS_WITH(rdma_create_id(channel, nullptr, nullptr, RDMA_PS_TCP), EINVAL);
  EXPECT_FAILS_WITH(rdma_create_id(channel, &id, nullptr, static_cast<rdma_port_space>(7)),
                    EINVAL);
  rdma_event_channel bogus{channel->fd};
  EXPECT_FAILS_WITH(rdma_create_id(&bogus, &id, nullptr, RDMA_PS_TCP), EINVAL);
  EXPECT_EQ(fake.live_ids(), 0u);
}

TEST_F(CmTest, KernelFailureOnCreateLeaksNothing) {
  rdma_cm_id* id = nullptr;
  fake.fail_next(Cmd::create_id, ENOMEM);
  EXPECT_FAILS_WITH(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), ENOMEM);
  // The same for a synchronous id, whose private channel must be released.
  fake.fail_next(Cmd::create_id, EMFILE);
  EXPECT_FAILS_WITH(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), EMFILE);
  EXPECT_EQ(fake.live_ids(), 0u);
}

TEST_F(CmTest, DestroyIdTwiceFailsCleanly) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_FAILS_WITH(rdma_destroy_id(id), EINVAL);
  EXPECT_FAILS_WITH(rdma_destroy_id(nullptr), EINVAL);
  rdma_cm_id forged{};
  EXPECT_FAILS_WITH(rdma_destroy_id(&forged), EINVAL);
}

TEST_F(CmTest, ADestroyedIdStaysInvalidWhileNewIdsAreMade) {
  // Ids live in reused slots (core/stable_pool.h); a freed slot is reused
  // last, so a stale pointer keeps failing while the application goes on.
  rdma_cm_id* old = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &old, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_destroy_id(old), 0);
  std::vector<rdma_cm_id*> fresh(50);
  for (auto& id : fresh) {
    ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
    EXPECT_NE(id, old);
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  EXPECT_FAILS_WITH(rdma_bind_addr(old, reinterpret_cast<sockaddr*>(&sin)), EINVAL);
  EXPECT_FAILS_WITH(rdma_destroy_id(old), EINVAL);
  EXPECT_EQ(rdma_get_src_port(old), 0);
  rdma_cm_id* inside = reinterpret_cast<rdma_cm_id*>(reinterpret_cast<char*>(fresh[0]) + 8);
  EXPECT_FAILS_WITH(rdma_destroy_id(inside), EINVAL);
  for (auto* id : fresh) EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(fake.live_ids(), 0u);
}

TEST_F(CmTest, BindRecordsAddressAndPort) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in sin = ipv4("10.1.2.3", 7471);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&sin)), 0);
  EXPECT_EQ(rdma_get_src_port(id), htons(7471));
  EXPECT_EQ(rdma_get_dst_port(id), 0);
  auto* local = reinterpret_cast<sockaddr_in*>(rdma_get_local_addr(id));
  EXPECT_EQ(local->sin_family, AF_INET);
  EXPECT_EQ(local->sin_addr.s_addr, sin.sin_addr.s_addr);
  EXPECT_EQ(id->verbs, nullptr);  // the fake reports no device
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(CmTest, BindRejectsBadAddresses) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_FAILS_WITH(rdma_bind_addr(id, nullptr), EINVAL);
  sockaddr unix_addr{};
  unix_addr.sa_family = AF_UNIX;
  EXPECT_FAILS_WITH(rdma_bind_addr(id, &unix_addr), EINVAL);
  sockaddr_in sin = ipv4("10.1.2.3", 1);
  EXPECT_FAILS_WITH(rdma_bind_addr(nullptr, reinterpret_cast<sockaddr*>(&sin)), EINVAL);
  fake.fail_next(Cmd::bind, EADDRINUSE);
  EXPECT_FAILS_WITH(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&sin)), EADDRINUSE);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(CmTest, PortsOfUnknownIdsAreZero) {
  EXPECT_EQ(rdma_get_src_port(nullptr), 0);
  rdma_cm_id forged{};
  EXPECT_EQ(rdma_get_dst_port(&forged), 0);
}

TEST_F(CmTest, SyncResolveReturnsEventStatusAsErrno) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  ASSERT_NE(id->channel, nullptr);
  fake.queue_event(id->channel->fd, uid(id), RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
  sockaddr_in dst = ipv4("10.9.9.9", 0);
  EXPECT_FAILS_WITH(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 100),
                    EHOSTUNREACH);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_ERROR);
  EXPECT_EQ(rdma_destroy_id(id), 0);  // acks the stored event itself
  EXPECT_EQ(fake.live_ids(), 0u);
}

TEST_F(CmTest, SyncResolveSucceedsOnAddrResolved) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  fake.queue_event(id->channel->fd, uid(id), RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  sockaddr_in dst = ipv4("10.9.9.9", 4791);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 100), 0);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(rdma_get_dst_port(id), htons(4791));
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(CmTest, ResolveRejectsBadAddresses) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_FAILS_WITH(rdma_resolve_addr(id, nullptr, nullptr, 100), EINVAL);
  sockaddr bad{};
  sockaddr_in dst = ipv4("10.9.9.9", 0);
  EXPECT_FAILS_WITH(rdma_resolve_addr(id, &bad, reinterpret_cast<sockaddr*>(&dst), 100), EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST(Devices, NoDeviceGivesNullAndZero) {
  // This host has no RDMA device; rdma-core answers NULL with a zero count.
  if (ibv_context** list = rdma_get_devices(nullptr)) {
    rdma_free_devices(list);
    GTEST_SKIP() << "host has RDMA devices";
  }
  int n = -1;
  EXPECT_EQ(rdma_get_devices(&n), nullptr);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(errno, ENODEV);
  rdma_free_devices(nullptr);  // harmless
}

}  // namespace
}  // namespace rdmacm::testing

namespace rdmacm::testing {
namespace {

TEST(Devices, FreeingForeignListIsRefused) {
  ibv_context* fake_list[2] = {nullptr, nullptr};
  errno = 0;
  rdma_free_devices(fake_list);  // not ours: must not reach free()
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace rdmacm::testing
