// Events queued from user space (rdma_write_cm_event, rdma_resolve_addrinfo)
// with the fake kernel: their doorbells never outlive them, failures are
// reported before anything is queued, and nothing leaks (ASan build).
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "fixture.h"

#if defined(__SANITIZE_ADDRESS__)
#define RDMACM_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RDMACM_TEST_LSAN 1
#endif
#endif
#ifdef RDMACM_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace rdmacm::testing {
namespace {

using namespace std::chrono_literals;

class UserEventTest : public CmTest {
 protected:
  void SetUp() override {
    CmTest::SetUp();
    fake.resolve_reports = true;
    ASSERT_EQ(rdma_create_id(channel, &id, this, RDMA_PS_TCP), 0);
    baseline = fake.live_ids();
  }
  void TearDown() override {
    if (id) {
      EXPECT_EQ(rdma_destroy_id(id), 0);
    }
    CmTest::TearDown();
  }
  rdma_cm_id* id = nullptr;
  size_t baseline = 0;
};

TEST_F(UserEventTest, DeliveredOnceAndDoorbellGone) {
  ASSERT_EQ(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 3, 42), 0);
  EXPECT_EQ(fake.live_ids(), baseline + 1) << "one doorbell while queued";
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_USER);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(ev->status, 3);
  EXPECT_EQ(ev->param.arg, 42u);
  EXPECT_EQ(fake.live_ids(), baseline) << "the doorbell is destroyed when its event is read";
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_FAILS_WITH(rdma_ack_cm_event(ev), EINVAL);
}

TEST_F(UserEventTest, WhatALiveIdOwnsIsNoLeak) {
  // An id lives in the library's own mapping (core/stable_pool.h), the only
  // place that points at what it owns (here the block of extras a queued
  // event makes): LeakSanitizer must be told to look there.
#ifdef RDMACM_TEST_LSAN
  ASSERT_EQ(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 7), 0);
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0);
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
#else
  GTEST_SKIP() << "a LeakSanitizer build's test";
#endif
}

TEST_F(UserEventTest, KernelFailuresQueueNothing) {
  fake.fail_next(Cmd::create_id, ENOMEM);
  EXPECT_FAILS_WITH(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 0), ENOMEM);
  fake.fail_next(Cmd::resolve_addr, ENODEV);
  EXPECT_FAILS_WITH(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 0), ENODEV);
  EXPECT_EQ(fake.live_ids(), baseline) << "a failed doorbell is destroyed";
  fake.fail_next(Cmd::create_id, EMFILE);
  EXPECT_FAILS_WITH(rdma_resolve_addrinfo(id, "127.0.0.1", "7471", nullptr), EMFILE);
  rdma_addrinfo* info = nullptr;
  EXPECT_FAILS_WITH(rdma_query_addrinfo(id, &info), ENOENT);
  // And the id still works afterwards.
  ASSERT_EQ(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 1), 0);
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(ev->param.arg, 1u);
  rdma_ack_cm_event(ev);
}

TEST_F(UserEventTest, DestroyCancelsQueuedEvents) {
  for (int i = 0; i < 5; ++i) ASSERT_EQ(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, i), 0);
  EXPECT_EQ(fake.live_ids(), baseline + 5);
  ASSERT_EQ(rdma_destroy_id(id), 0) << "must not wait for events never handed out";
  id = nullptr;
  EXPECT_EQ(fake.live_ids(), baseline - 1) << "the id and its doorbells are gone";
}

TEST_F(UserEventTest, ResolvedAddrinfoIsHandedOverOnce) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  // A second call while the first is under way (here: making its doorbell;
  // the resolver thread itself may finish at once) is refused.
  fake.on_create = [&] {
    EXPECT_FAILS_WITH(rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &hints), EBUSY);
  };
  ASSERT_EQ(rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &hints), 0);
  EXPECT_EQ(fake.on_create, nullptr) << "the second call was not made";
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDRINFO_RESOLVED);
  EXPECT_EQ(ev->status, 0);
  rdma_ack_cm_event(ev);
  rdma_addrinfo* info = nullptr;
  ASSERT_EQ(rdma_query_addrinfo(id, &info), 0);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->ai_family, AF_INET);
  EXPECT_EQ(info->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(info->ai_port_space, RDMA_PS_TCP);
  EXPECT_FAILS_WITH(rdma_query_addrinfo(id, &info), ENOENT);
  rdma_freeaddrinfo(info);
}

TEST_F(UserEventTest, ResolverFailureIsAnErrorEvent) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  ASSERT_EQ(rdma_resolve_addrinfo(id, "not-numeric", nullptr, &hints), 0);
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDRINFO_ERROR);
  EXPECT_EQ(ev->status, EAI_NONAME);
  rdma_ack_cm_event(ev);
}

TEST_F(UserEventTest, DestroyWhileResolvingLeaksNothing) {
  for (int i = 0; i < 20; ++i) {
    rdma_cm_id* other = nullptr;
    ASSERT_EQ(rdma_create_id(channel, &other, nullptr, RDMA_PS_TCP), 0);
    ASSERT_EQ(rdma_resolve_addrinfo(other, "127.0.0.1", "7471", nullptr), 0);
    ASSERT_EQ(rdma_destroy_id(other), 0);
  }
  // The resolver threads finish on their own; give them time before the
  // leak check at exit, and make sure nothing surfaced for the dead ids.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(fake.live_ids(), baseline);
}

// An id's rarely used state (queued events, groups, an addrinfo result) is
// made by the first call that needs it. Calls racing to be first end up
// sharing one (the TSan build checks the hand-over), and calls that only
// read or undo make nothing and find nothing.
TEST_F(UserEventTest, FirstUsesOfAnIdShareOneBlockOfExtras) {
  rdma_addrinfo* info = nullptr;
  EXPECT_FAILS_WITH(rdma_query_addrinfo(id, &info), ENOENT);
  sockaddr_in g = ipv4("239.0.0.9", 0);
  EXPECT_FAILS_WITH(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&g)), EADDRNOTAVAIL);

  // Two threads queue an event, one joins a group, one resolves an address.
  constexpr int kThreads = 4;
  for (int round = 0; round < 20; ++round) {
    rdma_cm_id* fresh = nullptr;
    ASSERT_EQ(rdma_create_id(channel, &fresh, nullptr, RDMA_PS_UDP), 0);
    std::atomic<int> ready{0}, ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        ++ready;
        while (ready < kThreads) std::this_thread::yield();
        int r = t == 1   ? rdma_join_multicast(fresh, reinterpret_cast<sockaddr*>(&g), nullptr)
                : t == 3 ? rdma_resolve_addrinfo(fresh, "127.0.0.1", "7471", nullptr)
                         : rdma_write_cm_event(fresh, RDMA_CM_EVENT_USER, 0, t);
        if (r == 0) ++ok;
      });
    for (auto& th : threads) th.join();
    ASSERT_EQ(ok, kThreads);
    EXPECT_EQ(rdma_leave_multicast(fresh, reinterpret_cast<sockaddr*>(&g)), 0)
        << "the group was kept where leave looks: " << strerror(errno);
    int user = 0, resolved = 0;
    for (int i = 0; i < 3; ++i) {
      rdma_cm_event* ev = nullptr;
      ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
      EXPECT_EQ(ev->id, fresh);
      user += ev->event == RDMA_CM_EVENT_USER;
      resolved += ev->event == RDMA_CM_EVENT_ADDRINFO_RESOLVED;
      rdma_ack_cm_event(ev);
    }
    EXPECT_EQ(user, 2);
    EXPECT_EQ(resolved, 1);
    ASSERT_EQ(rdma_query_addrinfo(fresh, &info), 0) << "the result was kept where query looks";
    rdma_freeaddrinfo(info);
    ASSERT_EQ(rdma_destroy_id(fresh), 0);
  }
  EXPECT_EQ(fake.live_ids(), baseline);
}

}  // namespace
}  // namespace rdmacm::testing
