// The RDMACM_1.4 calls on a kernel without the ucma WRITE_CM_EVENT command:
// rdma_write_cm_event and rdma_resolve_addrinfo/rdma_query_addrinfo deliver
// their events through the channel, waking poll(), in order with the
// kernel's own events. rdma-core 44 has none of these calls, so this binary
// runs against our library only.
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <netdb.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "../common/time_scale.h"
#include "cm_helpers.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using namespace std::chrono_literals;
using test::scaled;

class UserEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    ch_ = rdma_create_event_channel();
    ASSERT_NE(ch_, nullptr) << strerror(errno);
    ASSERT_EQ(rdma_create_id(ch_, &id_, this, RDMA_PS_TCP), 0) << strerror(errno);
  }
  void TearDown() override {
    if (id_) {
      EXPECT_EQ(rdma_destroy_id(id_), 0) << strerror(errno);
    }
    if (ch_) rdma_destroy_event_channel(ch_);
  }
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
};

TEST_F(UserEvents, WriteWakesPollAndCarriesStatusAndArg) {
  // A thread asleep in poll() on the channel is woken by another's write.
  auto waiter = std::async(std::launch::async, [this] {
    pollfd p{ch_->fd, POLLIN, 0};
    return poll(&p, 1, 10000);
  });
  std::this_thread::sleep_for(100ms);
  ASSERT_EQ(rdma_write_cm_event(id_, RDMA_CM_EVENT_USER, -7, 0x1122334455667788ull), 0)
      << strerror(errno);
  ASSERT_EQ(waiter.wait_for(scaled(5s)), std::future_status::ready) << "poll() not woken";
  EXPECT_EQ(waiter.get(), 1);

  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch_, RDMA_CM_EVENT_USER, &ev, 1000));
  EXPECT_EQ(ev->id, id_);
  EXPECT_EQ(ev->id->context, this);
  EXPECT_EQ(ev->status, -7);
  EXPECT_EQ(ev->param.arg, 0x1122334455667788ull);
  EXPECT_EQ(ev->listen_id, nullptr);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(wait_event(ch_, 300), nullptr) << "the doorbell's own event leaked out";
}

TEST_F(UserEvents, OrderedWithKernelEvents) {
  sockaddr_in dst = device_addr(7);
  ASSERT_EQ(rdma_resolve_addr(id_, nullptr, sa(&dst), 2000), 0)
      << strerror(errno);
  // Events queue in the order they happen: once the kernel's event waits on
  // the channel, ours come after it, in the order written.
  pollfd p{ch_->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, test::scaled_ms(5000)), 1) << "no ADDR_RESOLVED";
  for (uint64_t i = 1; i <= 3; ++i)
    ASSERT_EQ(rdma_write_cm_event(id_, RDMA_CM_EVENT_USER, 0, i), 0) << strerror(errno);
  ASSERT_TRUE(expect_event(ch_, RDMA_CM_EVENT_ADDR_RESOLVED));
  for (uint64_t i = 1; i <= 3; ++i) {
    rdma_cm_event* ev = nullptr;
    ASSERT_TRUE(next_event_is(ch_, RDMA_CM_EVENT_USER, &ev));
    EXPECT_EQ(ev->param.arg, i) << "user events out of order";
    rdma_ack_cm_event(ev);
  }
}

TEST_F(UserEvents, DestroyWaitsForTheAck) {
  ASSERT_EQ(rdma_write_cm_event(id_, RDMA_CM_EVENT_USER, 0, 1), 0);
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch_, RDMA_CM_EVENT_USER, &ev));
  auto destroyed = std::async(std::launch::async, [this] { return rdma_destroy_id(id_); });
  EXPECT_EQ(destroyed.wait_for(300ms), std::future_status::timeout)
      << "rdma_destroy_id returned while an event of the id was unacknowledged";
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  ASSERT_EQ(destroyed.wait_for(scaled(5s)), std::future_status::ready);
  EXPECT_EQ(destroyed.get(), 0);
  id_ = nullptr;
}

TEST_F(UserEvents, DestroyDropsQueuedEvents) {
  rdma_cm_id* other = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &other, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_write_cm_event(other, RDMA_CM_EVENT_USER, 0, 1), 0);
  ASSERT_EQ(rdma_write_cm_event(id_, RDMA_CM_EVENT_USER, 0, 2), 0);
  EXPECT_EQ(rdma_destroy_id(other), 0) << "must not wait for events never handed out";
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch_, RDMA_CM_EVENT_USER, &ev));
  EXPECT_EQ(ev->id, id_);
  EXPECT_EQ(ev->param.arg, 2u);
  rdma_ack_cm_event(ev);
  EXPECT_EQ(wait_event(ch_, 300), nullptr);
}

TEST_F(UserEvents, QueuedEventsFollowAMigratedId) {
  rdma_event_channel* other = rdma_create_event_channel();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(rdma_write_cm_event(id_, RDMA_CM_EVENT_USER, 0, 5), 0);
  ASSERT_EQ(rdma_resolve_addrinfo(id_, "127.0.0.1", "7471", nullptr), 0) << strerror(errno);
  ASSERT_EQ(rdma_migrate_id(id_, other), 0) << strerror(errno);
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(other, RDMA_CM_EVENT_USER, &ev)) << "the written event moved";
  EXPECT_EQ(ev->param.arg, 5u);
  rdma_ack_cm_event(ev);
  EXPECT_TRUE(expect_event(other, RDMA_CM_EVENT_ADDRINFO_RESOLVED)) << "so did the resolution";
  EXPECT_EQ(wait_event(ch_, 300), nullptr) << "nothing is left on the old channel";
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  id_ = nullptr;
  rdma_destroy_event_channel(other);
}

TEST_F(UserEvents, Misuse) {
  errno = 0;
  EXPECT_EQ(rdma_write_cm_event(nullptr, RDMA_CM_EVENT_USER, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_write_cm_event(id_, RDMA_CM_EVENT_ESTABLISHED, 0, 0), -1)
      << "only RDMA_CM_EVENT_USER is the application's to write";
  EXPECT_EQ(errno, EINVAL);
  rdma_cm_id* sync_id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &sync_id, nullptr, RDMA_PS_TCP), 0);
  errno = 0;
  EXPECT_EQ(rdma_write_cm_event(sync_id, RDMA_CM_EVENT_USER, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(sync_id), 0);
  errno = 0;
  EXPECT_EQ(rdma_write_cm_event(sync_id, RDMA_CM_EVENT_USER, 0, 0), -1) << "a destroyed id";
  EXPECT_EQ(errno, EINVAL);

  rdma_addrinfo* info = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_query_addrinfo(id_, &info), -1) << "nothing resolved yet";
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(rdma_query_addrinfo(id_, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addrinfo(id_, nullptr, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_SA | RAI_DNS;
  errno = 0;
  EXPECT_EQ(rdma_resolve_addrinfo(id_, nullptr, "7471", &hints), -1) << "exclusive flags";
  EXPECT_EQ(errno, EINVAL);
  hints.ai_flags = RAI_SA;
  errno = 0;
  EXPECT_EQ(rdma_resolve_addrinfo(id_, nullptr, "7471", &hints), -1);
  EXPECT_EQ(errno, EOPNOTSUPP) << "no IB service resolution in this kernel";
  EXPECT_EQ(wait_event(ch_, 300), nullptr) << "a refused call must not report an event";
}

// Prints what matters of an rdma_addrinfo list, to compare two of them.
std::string describe_list(const rdma_addrinfo* rai) {
  std::string out;
  for (; rai; rai = rai->ai_next) {
    char host[NI_MAXHOST] = "-", serv[NI_MAXSERV] = "-";
    const sockaddr* a = rai->ai_dst_addr ? rai->ai_dst_addr : rai->ai_src_addr;
    socklen_t len = rai->ai_dst_addr ? rai->ai_dst_len : rai->ai_src_len;
    if (a) getnameinfo(a, len, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
    out += "flags=" + std::to_string(rai->ai_flags) + " family=" + std::to_string(rai->ai_family) +
           " qp=" + std::to_string(rai->ai_qp_type) + " ps=" + std::to_string(rai->ai_port_space) +
           " src_len=" + std::to_string(rai->ai_src_len) + " dst_len=" + std::to_string(rai->ai_dst_len) +
           " addr=" + host + ":" + serv + "\n";
  }
  return out;
}

TEST_F(UserEvents, ResolveAddrinfoMatchesGetaddrinfo) {
  const std::string ip = device_ip();
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  ASSERT_EQ(rdma_resolve_addrinfo(id_, ip.c_str(), "7471", &hints), 0) << strerror(errno);
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch_, RDMA_CM_EVENT_ADDRINFO_RESOLVED, &ev));
  EXPECT_EQ(ev->id, id_);
  rdma_ack_cm_event(ev);

  rdma_addrinfo* async = nullptr;
  ASSERT_EQ(rdma_query_addrinfo(id_, &async), 0) << strerror(errno);
  ASSERT_NE(async, nullptr);
  rdma_addrinfo* direct = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(ip.c_str(), "7471", &hints, &direct), 0);
  EXPECT_EQ(describe_list(async), describe_list(direct));
  rdma_freeaddrinfo(direct);

  // The result is the caller's now: usable to connect, freed by it.
  ASSERT_NE(async->ai_dst_addr, nullptr);
  EXPECT_EQ(rdma_resolve_addr(id_, nullptr, async->ai_dst_addr, 2000), 0) << strerror(errno);
  EXPECT_TRUE(expect_event(ch_, RDMA_CM_EVENT_ADDR_RESOLVED));
  rdma_freeaddrinfo(async);
  rdma_addrinfo* again = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_query_addrinfo(id_, &again), -1) << "handed over once";
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(UserEvents, ResolveAddrinfoReportsResolverFailure) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  ASSERT_EQ(rdma_resolve_addrinfo(id_, "not-a-number.invalid", "7471", &hints), 0)
      << "the resolver's verdict comes as an event";
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch_, RDMA_CM_EVENT_ADDRINFO_ERROR, &ev));
  EXPECT_EQ(ev->status, EAI_NONAME) << gai_strerror(ev->status);
  rdma_ack_cm_event(ev);
  rdma_addrinfo* info = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_query_addrinfo(id_, &info), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(UserEvents, DestroyDuringResolutionIsClean) {
  for (int i = 0; i < 20; ++i) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    ASSERT_EQ(rdma_resolve_addrinfo(id, "localhost", "7471", nullptr), 0) << strerror(errno);
    EXPECT_EQ(rdma_destroy_id(id), 0);
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(wait_event(ch_, 300), nullptr) << "events of destroyed ids must not surface";
}

TEST(UserEventsSync, ResolveAddrinfoOnASynchronousIdResolvesInTheCall) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  const std::string ip = device_ip();
  ASSERT_EQ(rdma_resolve_addrinfo(id, ip.c_str(), "7471", nullptr), 0) << strerror(errno);
  rdma_addrinfo* info = nullptr;
  ASSERT_EQ(rdma_query_addrinfo(id, &info), 0) << strerror(errno);
  EXPECT_NE(info->ai_dst_addr, nullptr);
  rdma_freeaddrinfo(info);
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  errno = 0;
  EXPECT_EQ(rdma_resolve_addrinfo(id, "no.such.name.invalid", "7471", &hints), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

}  // namespace
}  // namespace rdmacm::rxe
