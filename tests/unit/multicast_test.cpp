// Multicast calls against the fake kernel: validation, fault injection,
// bookkeeping (no group left behind by a failed join) and the kernel's group
// events.
#include <arpa/inet.h>
#include <chrono>
#include <thread>
#include <fcntl.h>

#include "fixture.h"

namespace rdmacm::testing {
namespace {

sockaddr_in group(const char* ip) {
  sockaddr_in g{};
  g.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &g.sin_addr);
  return g;
}

TEST_F(CmTest, FailedJoinLeavesNoGroupBehind) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in g = group("239.0.0.9");
  fake.fail_next(Cmd::join_mcast, ENOMEM);
  EXPECT_FAILS_WITH(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&g), nullptr), ENOMEM);
  EXPECT_FAILS_WITH(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&g)), EADDRNOTAVAIL);
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&g), nullptr), 0);
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&g)), 0);
  EXPECT_FAILS_WITH(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&g)), EADDRNOTAVAIL);
  // Joined groups go with the id.
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&g), nullptr), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// As for destroy: a reader holding a group event taken from the kernel just
// before rdma_leave_multicast must still find the group to count the event,
// or the leave waits for ever.
TEST_F(CmTest, LeaveRacingAReaderCountsTheGroupEventTheReaderHolds) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in g = group("239.0.0.12");
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&g), nullptr), 0);
  fake.queue_event(channel->fd, fake.last_join_uid, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
  race_reader_with(
      [&] { EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&g)), 0); });
  EXPECT_FAILS_WITH(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&g)), EADDRNOTAVAIL);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(CmTest, JoinExValidatesItsAttributes) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in g = group("239.0.0.10");
  rdma_cm_join_mc_attr_ex attr{};
  attr.addr = reinterpret_cast<sockaddr*>(&g);
  EXPECT_FAILS_WITH(rdma_join_multicast_ex(id, nullptr, nullptr), EINVAL);
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
  EXPECT_FAILS_WITH(rdma_join_multicast_ex(id, &attr, nullptr), ENOTSUP);
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
  EXPECT_FAILS_WITH(rdma_join_multicast_ex(id, &attr, nullptr), EINVAL);
  attr.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attr.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
  EXPECT_FAILS_WITH(rdma_join_multicast_ex(id, &attr, nullptr), EINVAL);
  attr.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
  EXPECT_EQ(rdma_join_multicast_ex(id, &attr, nullptr), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// The kernel's group events reach the application against the joining id,
// with the join's context in param.ud.private_data: MULTICAST_JOIN (no QP,
// so nothing to attach) and a later MULTICAST_ERROR with the kernel's
// status. Events for a group already left are dropped. (The library's own
// MULTICAST_ERROR, when attaching the QP fails, is tested on rxe.)
TEST_F(CmTest, GroupEventsCarryTheJoinContext) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in g = group("239.0.0.11");
  int ctx = 11;
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&g), &ctx), 0);
  uint64_t group_uid = fake.last_join_uid;
  ASSERT_NE(group_uid, 0u);
  EXPECT_NE(group_uid, uid(id)) << "groups have their own uid";

  fake.queue_event(channel->fd, group_uid, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
  fake.queue_event(channel->fd, group_uid, RDMA_CM_EVENT_MULTICAST_ERROR, -ENETRESET);
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(ev->status, 0);
  EXPECT_EQ(ev->param.ud.private_data, &ctx);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_MULTICAST_ERROR);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(ev->status, -ENETRESET);
  EXPECT_EQ(ev->param.ud.private_data, &ctx);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);

  // The error does not leave the group: that is the application's call.
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&g)), 0);
  fake.queue_event(channel->fd, group_uid, RDMA_CM_EVENT_MULTICAST_ERROR, -ENETRESET);
  fake.queue_event(channel->fd, uid(id), RDMA_CM_EVENT_ADDR_CHANGE, 0);
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_CHANGE) << "the left group's error was dropped";
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

}  // namespace
}  // namespace rdmacm::testing
