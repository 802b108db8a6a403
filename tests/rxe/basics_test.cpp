// The CM's ground floor on a device: the kernel's ucma ABI version, event
// channels (pollable, blocking, interrupted by a signal), ids in every port
// space, binding, resolving, destroy waiting for acks (and racing a reader),
// rdma_get_devices and event names, through the kernel's rdma_cm over
// Soft-RoCE. tests/README.md maps every feature to its tests.
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "../common/time_scale.h"
#include "cm_helpers.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {


class Rxe : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(device_ip().empty()) << "no RDMA device with an IPv4 address";
    channel = rdma_create_event_channel();
    ASSERT_NE(channel, nullptr) << strerror(errno);
  }
  void TearDown() override {
    if (id) {
      EXPECT_EQ(rdma_destroy_id(id), 0);
    }
    if (channel) rdma_destroy_event_channel(channel);
  }
  // Waits up to 5 s (scaled) for the next event; fails the test on timeout.
  rdma_cm_event* next_event() {
    pollfd p{channel->fd, POLLIN, 0};
    if (poll(&p, 1, test::scaled_ms(5000)) != 1) {
      ADD_FAILURE() << "no event within " << test::scaled_ms(5000) << " ms";
      return nullptr;
    }
    rdma_cm_event* ev = nullptr;
    EXPECT_EQ(rdma_get_cm_event(channel, &ev), 0) << strerror(errno);
    return ev;
  }

  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
};

TEST(Kernel, SpeaksTheUcmaAbiWeSupport) {
  std::ifstream f("/sys/class/misc/rdma_cm/abi_version");
  int version = 0;
  ASSERT_TRUE(f >> version);
  EXPECT_GE(version, 3);
  EXPECT_LE(version, 4);
}

TEST_F(Rxe, ChannelFdIsPollableAndBlockingByDefault) {
  ASSERT_GE(channel->fd, 0);
  int flags = fcntl(channel->fd, F_GETFL);
  ASSERT_NE(flags, -1);
  EXPECT_FALSE(flags & O_NONBLOCK);
  EXPECT_TRUE(fcntl(channel->fd, F_GETFD) & FD_CLOEXEC);
  pollfd p{channel->fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 50), 0) << "readable with no event pending";
}

TEST_F(Rxe, NonBlockingChannelFailsWithEagain) {
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* ev = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(channel, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(Rxe, CreateAndDestroyIdInEveryPortSpace) {
  struct {
    rdma_port_space ps;
    ibv_qp_type qp_type;
  } cases[] = {{RDMA_PS_TCP, IBV_QPT_RC}, {RDMA_PS_UDP, IBV_QPT_UD},
               {RDMA_PS_IPOIB, IBV_QPT_UD}, {RDMA_PS_IB, IBV_QPT_RC}};
  for (auto& c : cases) {
    rdma_cm_id* cm = nullptr;
    ASSERT_EQ(rdma_create_id(channel, &cm, this, c.ps), 0)
        << "ps " << c.ps << ": " << strerror(errno);
    EXPECT_EQ(cm->ps, c.ps);
    EXPECT_EQ(cm->qp_type, c.qp_type);
    EXPECT_EQ(cm->context, this);
    EXPECT_EQ(cm->channel, channel);
    EXPECT_EQ(rdma_destroy_id(cm), 0);
  }
}

TEST_F(Rxe, BindToDeviceAddressFillsIdAsRdmaCoreDoes) {
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in addr = device_addr(0);
  ASSERT_EQ(rdma_bind_addr(id, sa(&addr)), 0) << strerror(errno);

  EXPECT_NE(rdma_get_src_port(id), 0) << "kernel should pick a port";
  EXPECT_EQ(rdma_get_dst_port(id), 0);
  auto* local = reinterpret_cast<sockaddr_in*>(rdma_get_local_addr(id));
  EXPECT_EQ(local->sin_family, AF_INET);
  EXPECT_EQ(local->sin_addr.s_addr, addr.sin_addr.s_addr);
  EXPECT_EQ(local->sin_port, rdma_get_src_port(id));
  ASSERT_NE(id->verbs, nullptr) << "binding to a device address binds the device";
  EXPECT_STREQ(ibv_get_device_name(id->verbs->device), "rxe0");
  EXPECT_EQ(id->port_num, 1);
  // RoCE: the source GID is the IPv4-mapped address of the netdev.
  const uint8_t* gid = id->route.addr.addr.ibaddr.sgid.raw;
  EXPECT_EQ(gid[10], 0xff);
  EXPECT_EQ(gid[11], 0xff);
  EXPECT_EQ(memcmp(gid + 12, &addr.sin_addr, 4), 0);
  // No peer yet: the kernel reports the unspecified address of our family.
  auto* peer = reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(id));
  EXPECT_EQ(peer->sin_family, AF_INET);
  EXPECT_EQ(peer->sin_addr.s_addr, htonl(INADDR_ANY));
  EXPECT_EQ(peer->sin_port, 0);
  EXPECT_NE(id->pd, nullptr) << "bound ids get the device's default PD";
}

TEST_F(Rxe, BindToChosenPortAndDetectConflicts) {
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in addr = device_addr(18515);
  ASSERT_EQ(rdma_bind_addr(id, sa(&addr)), 0) << strerror(errno);
  EXPECT_EQ(rdma_get_src_port(id), htons(18515));

  rdma_cm_id* second = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &second, nullptr, RDMA_PS_TCP), 0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(second, sa(&addr)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  // The same port in another port space is free.
  rdma_cm_id* udp = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &udp, nullptr, RDMA_PS_UDP), 0);
  EXPECT_EQ(rdma_bind_addr(udp, sa(&addr)), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(udp), 0);
  EXPECT_EQ(rdma_destroy_id(second), 0);
}

TEST_F(Rxe, WildcardBindHasNoDevice) {
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  ASSERT_EQ(rdma_bind_addr(id, sa(&any)), 0) << strerror(errno);
  EXPECT_EQ(id->verbs, nullptr);
  EXPECT_NE(rdma_get_src_port(id), 0);
}

TEST_F(Rxe, BindToForeignAddressFails) {
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in foreign{};
  foreign.sin_family = AF_INET;
  inet_pton(AF_INET, "192.0.2.1", &foreign.sin_addr);  // TEST-NET-1, not ours
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, sa(&foreign)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
}

TEST_F(Rxe, GetDevicesReturnsTheContextIdsUse) {
  int n = -1;
  ibv_context** list = rdma_get_devices(&n);
  ASSERT_NE(list, nullptr) << strerror(errno);
  ASSERT_EQ(n, 1);
  ASSERT_NE(list[0], nullptr);
  EXPECT_EQ(list[1], nullptr) << "list must be NULL-terminated";
  EXPECT_STREQ(ibv_get_device_name(list[0]->device), "rxe0");

  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in addr = device_addr(0);
  ASSERT_EQ(rdma_bind_addr(id, sa(&addr)), 0);
  EXPECT_EQ(id->verbs, list[0]) << "one context per device, shared";
  ibv_context* ctx = list[0];
  rdma_free_devices(list);
  // Contexts stay open after the list is freed, as with rdma-core.
  ibv_device_attr attr;
  EXPECT_EQ(ibv_query_device(ctx, &attr), 0);
  ibv_context** again = rdma_get_devices(nullptr);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again[0], ctx);
  rdma_free_devices(again);
}

TEST_F(Rxe, ResolveAddrMakesChannelReadable) {
  ASSERT_EQ(rdma_create_id(channel, &id, this, RDMA_PS_TCP), 0);
  sockaddr_in dst = device_addr(7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(&dst), 2000), 0) << strerror(errno);
  rdma_cm_event* ev = next_event();
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED) << rdma_event_str(ev->event);
  EXPECT_EQ(ev->status, 0);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(ev->id->context, this);
  EXPECT_NE(id->verbs, nullptr);
  EXPECT_EQ(rdma_get_dst_port(id), htons(7471));
  EXPECT_EQ(reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(id))->sin_addr.s_addr,
            dst.sin_addr.s_addr);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
}

TEST_F(Rxe, SyncIdResolvesWithoutChannel) {
  rdma_cm_id* sync = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &sync, nullptr, RDMA_PS_TCP), 0);
  ASSERT_NE(sync->channel, nullptr) << "sync ids get a private channel";
  sockaddr_in dst = device_addr(7471);
  ASSERT_EQ(rdma_resolve_addr(sync, nullptr, sa(&dst), 2000), 0) << strerror(errno);
  ASSERT_NE(sync->event, nullptr);
  EXPECT_EQ(sync->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_NE(sync->verbs, nullptr);
  EXPECT_EQ(rdma_destroy_id(sync), 0);
}

TEST_F(Rxe, DestroyBlocksUntilEventsAreAcked) {
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = device_addr(7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(&dst), 2000), 0);
  rdma_cm_event* ev = next_event();
  ASSERT_NE(ev, nullptr);
  std::atomic<bool> done{false};
  rdma_cm_id* victim = std::exchange(id, nullptr);
  std::thread t([&] {
    EXPECT_EQ(rdma_destroy_id(victim), 0);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(done);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  t.join();
  EXPECT_TRUE(done);
}

// A blocking rdma_get_cm_event interrupted by a signal whose handler was
// installed without SA_RESTART returns -1/EINTR, as rdma-core's does:
// applications rely on it to stop on SIGINT/SIGTERM.
TEST_F(Rxe, SignalInterruptsABlockedGetEvent) {
  struct sigaction sa_new {}, sa_old {};
  sa_new.sa_handler = [](int) {};
  sigemptyset(&sa_new.sa_mask);
  sa_new.sa_flags = 0;  // no SA_RESTART
  ASSERT_EQ(sigaction(SIGUSR1, &sa_new, &sa_old), 0);
  std::atomic<int> result{1}, err{0};
  std::thread reader([&] {
    rdma_cm_event* ev = nullptr;
    int r = rdma_get_cm_event(channel, &ev);
    err = errno;
    if (r == 0) rdma_ack_cm_event(ev);
    result = r;
  });
  // The signal must find the reader asleep in the kernel, and nothing says
  // when it is: signal it every 100 ms until it returns (one that comes
  // before the read runs the empty handler and is lost; the read still
  // sleeps until the next), for 3 s (scaled) at most.
  auto until = std::chrono::steady_clock::now() + test::scaled(std::chrono::seconds(3));
  int signals = 0;
  while (result == 1 && std::chrono::steady_clock::now() < until) {
    pthread_kill(reader.native_handle(), SIGUSR1);
    ++signals;
    for (int i = 0; i < 10 && result == 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  bool returned = result != 1;
  if (!returned) {  // release the reader with a real event, then fail
    ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst = device_addr(7471);
    rdma_resolve_addr(id, nullptr, sa(&dst), 2000);
  }
  reader.join();
  sigaction(SIGUSR1, &sa_old, nullptr);
  EXPECT_TRUE(returned) << "rdma_get_cm_event did not return after " << signals << " signals";
  EXPECT_EQ(result, -1);
  EXPECT_EQ(err, EINTR);
}

// Destroying ids while another thread reads their channel: the reader may
// have taken an id's event from the kernel (which then counts it) just before
// the destroy. rdma-core completes every such destroy; so must we. A hang is
// a failure (the watchdog).
TEST_F(Rxe, DestroyRacingAReaderOnTheSameChannel) {
  std::atomic<bool> stop{false};
  std::atomic<int> events{0};
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK), 0);
  std::thread reader([&] {
    while (!stop) {
      pollfd p{channel->fd, POLLIN, 0};
      if (poll(&p, 1, 50) != 1) continue;
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(channel, &ev) == 0) {
        ++events;
        rdma_ack_cm_event(ev);
      }
    }
  });
  sockaddr_in dst = device_addr(7471);
  constexpr int kTries = 300;
  int resolved = 0;
  for (int i = 0; i < kTries; ++i) {
    rdma_cm_id* racer = nullptr;
    ASSERT_EQ(rdma_create_id(channel, &racer, nullptr, RDMA_PS_TCP), 0);
    if (rdma_resolve_addr(racer, nullptr, sa(&dst), 2000) == 0) ++resolved;
    // Vary the moment of the destroy around the event's arrival.
    if (i % 3) std::this_thread::sleep_for(std::chrono::microseconds(50 * (i % 20)));
    ASSERT_EQ(rdma_destroy_id(racer), 0);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(resolved, kTries);
  std::cout << "[ INFO     ] " << kTries << " destroys raced the reader, which got "
            << events << " events\n";
}

TEST(EventStr, EveryEventHasItsName) {
  for (int i = RDMA_CM_EVENT_ADDR_RESOLVED; i <= RDMA_CM_EVENT_TIMEWAIT_EXIT; ++i) {
    std::string name = rdma_event_str(static_cast<rdma_cm_event_type>(i));
    EXPECT_EQ(name.rfind("RDMA_CM_EVENT_", 0), 0u) << i << ": " << name;
  }
  EXPECT_STREQ(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED");
  EXPECT_STREQ(rdma_event_str(static_cast<rdma_cm_event_type>(99)), "UNKNOWN EVENT");
}

}  // namespace
}  // namespace rdmacm::rxe
