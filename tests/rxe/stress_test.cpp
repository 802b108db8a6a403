// Concurrency stress and soak on a real device, run against ours and
// rdma-core's library alike (no error rdma-core does not give, no hang: the
// watchdog turns one into a failure):
// - client threads looping create/resolve/connect/disconnect/destroy on
//   private channels and with synchronous ids, against a server whose one
//   shared channel is served by a dispatcher thread;
// - destroys racing a reader blocked in rdma_get_cm_event on their channel;
// - 1,000 connect/disconnect cycles in one process, fds and memory printed
//   before and after (no growth allowed beyond a margin);
// - 10,000 ids alive at once on one channel.
// RDMACM_STRESS_SECONDS sets the stress duration (default 60).
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <dirent.h>
#include <malloc.h>
#include <poll.h>
#include <sys/prctl.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cm_helpers.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using Clock = std::chrono::steady_clock;

int stress_seconds() {
  const char* s = std::getenv("RDMACM_STRESS_SECONDS");
  return s ? std::atoi(s) : 60;
}

size_t open_fds() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

long proc_kib(const char* file, const std::string& wanted) {
  std::ifstream f(file);
  std::string key;
  long value = 0;
  while (f >> key) {
    if (key == wanted) {
      f >> value;
      return value;
    }
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

long rss_kib() { return proc_kib("/proc/self/status", "VmRSS:"); }

// Bytes malloc has handed out and not had back, over all arenas.
long heap_kib() {
  struct mallinfo2 m = mallinfo2();
  return long((m.uordblks + m.hblkhd) / 1024);
}

// Errors seen by any thread, reported once at the end.
class Errors {
 public:
  void add(const std::string& what) {
    std::lock_guard lock(mutex_);
    if (list_.size() < 20) list_.push_back(what + ": " + std::strerror(errno));
    ++count_;
  }
  ::testing::AssertionResult none() const {
    if (!count_) return ::testing::AssertionSuccess();
    auto r = ::testing::AssertionFailure() << count_ << " errors, first ones:";
    for (const auto& e : list_) r << "\n  " << e;
    return r;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> list_;
  std::atomic<int> count_{0};
};

// A listener whose one channel a dispatcher thread serves: it accepts every
// request with a QP, and tears the connection down on DISCONNECTED.
class Server {
 public:
  explicit Server(Errors& errors) : errors_(errors) {
    ch_ = rdma_create_event_channel();
    EXPECT_NE(ch_, nullptr);
    EXPECT_EQ(rdma_create_id(ch_, &listener_, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in a = device_addr(0);
    EXPECT_EQ(rdma_bind_addr(listener_, sa(&a)), 0);
    EXPECT_EQ(rdma_listen(listener_, 64), 0);
    port_ = rdma_get_src_port(listener_);
    dispatcher_ = std::thread([this] { serve(); });
  }
  ~Server() {
    // Wake the dispatcher with an event of an id of its own channel.
    rdma_cm_id* stop = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &stop, nullptr, RDMA_PS_TCP), 0);
    stop_ = stop;
    sockaddr_in a = device_addr(7471);
    EXPECT_EQ(rdma_resolve_addr(stop, nullptr, sa(&a), 2000), 0);
    dispatcher_.join();
    EXPECT_EQ(rdma_destroy_id(stop), 0);
    EXPECT_EQ(rdma_destroy_id(listener_), 0);
    rdma_destroy_event_channel(ch_);
  }
  uint16_t port() const { return port_; }  // network order

 private:
  void serve() {
    for (;;) {
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch_, &ev)) {
        if (errno == EINTR) continue;
        errors_.add("server: rdma_get_cm_event");
        return;
      }
      rdma_cm_id* id = ev->id;
      if (id == stop_.load()) {
        rdma_ack_cm_event(ev);
        return;
      }
      switch (ev->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: {
          ibv_qp_init_attr attr = rc_qp_attr(4);
          rdma_conn_param cp{};
          cp.responder_resources = cp.initiator_depth = 1;
          if (rdma_create_qp(id, nullptr, &attr) || rdma_accept(id, &cp)) {
            errors_.add("server: create_qp/accept");
            rdma_ack_cm_event(ev);
            if (id->qp) rdma_destroy_qp(id);
            rdma_destroy_id(id);
            continue;
          }
          break;
        }
        case RDMA_CM_EVENT_DISCONNECTED:
          rdma_ack_cm_event(ev);
          rdma_destroy_qp(id);
          if (rdma_destroy_id(id)) errors_.add("server: destroy_id");
          continue;
        case RDMA_CM_EVENT_ESTABLISHED:
          break;
        default:
          errors_.add(std::string("server: unexpected ") + rdma_event_str(ev->event));
      }
      rdma_ack_cm_event(ev);
    }
  }

  Errors& errors_;
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  std::atomic<rdma_cm_id*> stop_{nullptr};
  uint16_t port_ = 0;
  std::thread dispatcher_;
};

// One client connection, start to finish, on a private channel (or, sync,
// on a synchronous id). Returns true if every step went as documented.
bool cycle(uint16_t port, bool sync, Errors& errors) {
  rdma_event_channel* ch = sync ? nullptr : rdma_create_event_channel();
  if (!sync && !ch) return errors.add("client: create channel"), false;
  rdma_cm_id* id = nullptr;
  bool ok = false;
  auto step = [&](rdma_cm_event_type want) {
    if (sync) return id->event && id->event->event == want;
    return expect_event(ch, want, 5000) == ::testing::AssertionSuccess();
  };
  do {
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) { errors.add("client: create_id"); break; }
    sockaddr_in dst = device_addr(0);
    dst.sin_port = port;
    if (rdma_resolve_addr(id, nullptr, sa(&dst), 2000) || !step(RDMA_CM_EVENT_ADDR_RESOLVED)) { errors.add("client: resolve_addr"); break; }
    if (rdma_resolve_route(id, 2000) || !step(RDMA_CM_EVENT_ROUTE_RESOLVED)) { errors.add("client: resolve_route"); break; }
    ibv_qp_init_attr attr = rc_qp_attr(4);
    if (rdma_create_qp(id, nullptr, &attr)) { errors.add("client: create_qp"); break; }
    rdma_conn_param cp{};
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    if (rdma_connect(id, &cp) || !step(RDMA_CM_EVENT_ESTABLISHED)) { errors.add("client: connect"); break; }
    if (rdma_disconnect(id)) { errors.add("client: disconnect"); break; }
    if (!sync && !step(RDMA_CM_EVENT_DISCONNECTED)) { errors.add("client: DISCONNECTED"); break; }
    ok = true;
  } while (false);
  if (id) {
    if (id->qp) rdma_destroy_qp(id);
    if (rdma_destroy_id(id)) errors.add("client: destroy_id"), ok = false;
  }
  if (ch) rdma_destroy_event_channel(ch);
  return ok;
}

TEST(Stress, ClientThreadsOnPrivateChannelsAndSyncIdsAgainstADispatcher) {
  Errors errors;
  std::atomic<int> cycles{0};
  {
    Server server(errors);
    auto until = Clock::now() + std::chrono::seconds(stress_seconds());
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t) {
      clients.emplace_back([&, t] {
        while (Clock::now() < until)
          if (cycle(server.port(), t % 2 == 1, errors)) ++cycles;
      });
    }
    for (auto& c : clients) c.join();
  }
  std::cout << "[ INFO     ] " << cycles << " connections in " << stress_seconds()
            << " s by 4 threads (2 on private channels, 2 with synchronous ids)\n";
  EXPECT_TRUE(errors.none());
  EXPECT_GT(cycles, 0);
}

TEST(Stress, DestroysRacingABlockedReader) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* stop = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &stop, nullptr, RDMA_PS_TCP), 0);
  std::atomic<int> events{0};
  std::thread reader([&] {
    for (;;) {
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch, &ev)) continue;  // blocking
      bool last = ev->id == stop;
      ++events;
      rdma_ack_cm_event(ev);
      if (last) return;
    }
  });
  sockaddr_in dst = device_addr(7471);
  constexpr int kTries = 1000;
  for (int i = 0; i < kTries; ++i) {
    rdma_cm_id* racer = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &racer, nullptr, RDMA_PS_TCP), 0);
    ASSERT_EQ(rdma_resolve_addr(racer, nullptr, sa(&dst), 2000), 0);
    if (i % 4) std::this_thread::sleep_for(std::chrono::microseconds(37 * (i % 29)));
    ASSERT_EQ(rdma_destroy_id(racer), 0);
  }
  ASSERT_EQ(rdma_resolve_addr(stop, nullptr, sa(&dst), 2000), 0);
  reader.join();
  std::cout << "[ INFO     ] " << kTries << " destroys raced a blocked reader, which got "
            << events - 1 << " of their events\n";
  EXPECT_EQ(rdma_destroy_id(stop), 0);
  rdma_destroy_event_channel(ch);
}

TEST(Soak, AThousandConnectionsLeaveNoFdsOrMemoryBehind) {
  // With transparent huge pages on "always" (the VM's kernel), khugepaged may fold a thread's
  // stack or an arena into a 2 MiB page at any moment: RSS then jumps by 2 MiB with no byte
  // leaked (seen in CI: 6100 -> 8132 KiB while malloc's bytes in use stayed level).
  ASSERT_EQ(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), 0);
  Errors errors;
  Server server(errors);
  // Warm up: the first connections open the device, its PD, caches.
  for (int i = 0; i < 20; ++i) cycle(server.port(), false, errors);
  size_t fds0 = open_fds();
  long rss0 = rss_kib(), heap0 = heap_kib();
  long huge0 = proc_kib("/proc/self/smaps_rollup", "AnonHugePages:");
  constexpr int kCycles = 1000;
  int ok = 0;
  for (int i = 0; i < kCycles; ++i) ok += cycle(server.port(), i % 2, errors);
  size_t fds1 = open_fds();
  long rss1 = rss_kib(), heap1 = heap_kib();
  long huge1 = proc_kib("/proc/self/smaps_rollup", "AnonHugePages:");
  std::cout << "[ INFO     ] " << kCycles << " connect/disconnect cycles: fds " << fds0 << " -> "
            << fds1 << ", RSS " << rss0 << " -> " << rss1 << " KiB (huge pages " << huge0 << " -> "
            << huge1 << "), heap in use " << heap0 << " -> " << heap1 << " KiB\n";
  EXPECT_TRUE(errors.none());
  EXPECT_EQ(ok, kCycles);
  EXPECT_LE(fds1, fds0) << "fds leaked";
  // A leak of even 100 bytes a cycle shows as 100 KiB; allocator slack stays below. Measured
  // (VM): RSS +8 KiB and malloc's bytes in use unchanged, for both libraries.
  EXPECT_LT(rss1 - rss0, 1024) << "memory grew";
  EXPECT_LT(heap1 - heap0, 64) << "malloc's bytes in use grew";
}

TEST(Soak, TenThousandIdsAliveOnOneChannel) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  constexpr int kIds = 10000;
  std::vector<rdma_cm_id*> ids(kIds, nullptr);
  long rss0 = rss_kib();
  auto t0 = Clock::now();
  for (int i = 0; i < kIds; ++i)
    ASSERT_EQ(rdma_create_id(ch, &ids[i], nullptr, RDMA_PS_TCP), 0) << i << ": " << strerror(errno);
  auto t1 = Clock::now();
  long rss1 = rss_kib();
  // Every one is live and usable: bind each to the device.
  sockaddr_in a = device_addr(0);
  int bound = 0;
  for (rdma_cm_id* id : ids) bound += rdma_bind_addr(id, sa(&a)) == 0;
  auto t2 = Clock::now();
  for (rdma_cm_id* id : ids) ASSERT_EQ(rdma_destroy_id(id), 0);
  auto t3 = Clock::now();
  auto us = [](auto d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
  std::cout << "[ INFO     ] " << kIds << " ids: create " << us(t1 - t0) / kIds << " us/id, bind "
            << us(t2 - t1) / kIds << " us/id, destroy " << us(t3 - t2) / kIds << " us/id, RSS "
            << (rss1 - rss0) * 1024 / kIds << " bytes/id\n";
  EXPECT_EQ(bound, kIds);
  rdma_destroy_event_channel(ch);
}

}  // namespace
}  // namespace rdmacm::rxe
