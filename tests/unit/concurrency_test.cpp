// Many threads on the library at once, against the fake kernel and device:
// ids created, connected, disconnected and destroyed on private and shared
// channels; destroy racing a blocked rdma_get_cm_event; rdma_migrate_id racing
// the readers of both channels; many threads acknowledging. Meant for the
// ThreadSanitizer build (RDMACM_TSAN), where any data race fails the test;
// every test stays well under 5 s there, and the watchdog fails a hang.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_verbs.h"
#include "fixture.h"

namespace rdmacm::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kStop = 0x5709;

// A thread that reads a channel (blocking) and acknowledges each event after
// recording it, until stop() makes it write itself a USER event to end on.
class Pump {
 public:
  explicit Pump(rdma_event_channel* channel) : channel_(channel) {
    EXPECT_EQ(rdma_create_id(channel, &stopper_, nullptr, RDMA_PS_TCP), 0);
    thread_ = std::thread([this] { run(); });
  }
  ~Pump() { stop(); }

  void stop() {
    if (!thread_.joinable()) return;
    EXPECT_EQ(rdma_write_cm_event(stopper_, RDMA_CM_EVENT_USER, 0, kStop), 0);
    thread_.join();
    EXPECT_EQ(rdma_destroy_id(stopper_), 0);
  }

  // Waits until this id's events include `type`; false after 4 s (scaled).
  bool wait_for(rdma_cm_id* id, rdma_cm_event_type type) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, test::scaled(4s), [&] {
      for (auto t : seen_[id])
        if (t == type) return true;
      return false;
    });
  }
  // Forgets an id's events (before it is destroyed: its address may be reused).
  void forget(rdma_cm_id* id) {
    std::lock_guard lock(mutex_);
    seen_.erase(id);
  }
  size_t count(rdma_cm_id* id) {
    std::lock_guard lock(mutex_);
    return seen_[id].size();
  }
  size_t count(rdma_cm_id* id, rdma_cm_event_type type) {
    std::lock_guard lock(mutex_);
    return std::count(seen_[id].begin(), seen_[id].end(), type);
  }
  // The new id of the next connection request; nullptr after the timeout
  // (scaled; 0: only one already there).
  rdma_cm_id* next_request(std::chrono::milliseconds timeout = 4s) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, test::scaled(timeout), [&] { return !requests_.empty(); }))
      return nullptr;
    rdma_cm_id* id = requests_.front();
    requests_.erase(requests_.begin());
    return id;
  }

 private:
  void run() {
    for (;;) {
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(channel_, &ev)) {
        ADD_FAILURE() << "rdma_get_cm_event: " << strerror(errno);
        return;
      }
      bool stop = ev->id == stopper_ && ev->event == RDMA_CM_EVENT_USER && ev->param.arg == kStop;
      {
        std::lock_guard lock(mutex_);
        seen_[ev->id].push_back(ev->event);
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) requests_.push_back(ev->id);
      }
      cv_.notify_all();
      // After the notification: a destroy may be waiting for this ack.
      EXPECT_EQ(rdma_ack_cm_event(ev), 0);
      if (stop) return;
    }
  }

  rdma_event_channel* channel_;
  rdma_cm_id* stopper_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<rdma_cm_id*, std::vector<rdma_cm_event_type>> seen_;
  std::vector<rdma_cm_id*> requests_;
  std::thread thread_;
};

class Concurrency : public CmTest {
 protected:
  void SetUp() override {
    answer_at_once(fake);
    CmTest::SetUp();
  }
  void TearDown() override {
    CmTest::TearDown();
    EXPECT_EQ(fake.live_ids(), 0u);
    EXPECT_EQ(fake_verbs_objects(), 0u);
  }

  // Runs body(thread index) on n threads at once.
  template <typename F>
  static void on_threads(int n, F body) {
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) threads.emplace_back(body, t);
    for (auto& t : threads) t.join();
  }
};

sockaddr_in peer = ipv4("10.0.0.2", 7471);
sockaddr* const kPeer = reinterpret_cast<sockaddr*>(&peer);

// Synchronous ids, each on its private channel: the whole life of a
// connection, with and without a QP, on many threads.
TEST_F(Concurrency, SynchronousIdsConnectAndDisconnect) {
  on_threads(6, [](int t) {
    for (int i = 0; i < 40; ++i) {
      rdma_cm_id* id = nullptr;
      ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
      ASSERT_EQ(rdma_resolve_addr(id, nullptr, kPeer, 100), 0);
      ASSERT_EQ(rdma_resolve_route(id, 100), 0);
      bool qp = (t + i) % 2;
      if (qp) {
        ASSERT_EQ(add_qp(id), 0);
      }
      rdma_conn_param param{};
      ASSERT_EQ(rdma_connect(id, qp ? nullptr : &param), 0);
      EXPECT_EQ(id->event->event,
                qp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE);
      ASSERT_EQ(rdma_disconnect(id), 0);
      if (qp) rdma_destroy_qp(id);
      ASSERT_EQ(rdma_destroy_id(id), 0);
    }
  });
}

// One channel shared by every thread, one thread reading it: each worker
// waits for its own events, which the reader acknowledges only after
// handing them over (so the destroys also wait for acks from another thread).
TEST_F(Concurrency, SharedChannelWithOneReader) {
  Pump pump(channel);
  on_threads(6, [&](int t) {
    for (int i = 0; i < 25; ++i) {
      rdma_cm_id* id = nullptr;
      ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
      ASSERT_EQ(rdma_resolve_addr(id, nullptr, kPeer, 100), 0);
      ASSERT_TRUE(pump.wait_for(id, RDMA_CM_EVENT_ADDR_RESOLVED));
      ASSERT_EQ(rdma_resolve_route(id, 100), 0);
      ASSERT_TRUE(pump.wait_for(id, RDMA_CM_EVENT_ROUTE_RESOLVED));
      bool qp = (t + i) % 2;
      if (qp) {
        ASSERT_EQ(add_qp(id), 0);
      }
      rdma_conn_param param{};
      ASSERT_EQ(rdma_connect(id, qp ? nullptr : &param), 0);
      ASSERT_TRUE(pump.wait_for(
          id, qp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE));
      if (!qp) {
        ASSERT_EQ(rdma_establish(id), 0);
      }
      ASSERT_EQ(rdma_disconnect(id), 0);
      ASSERT_TRUE(pump.wait_for(id, RDMA_CM_EVENT_DISCONNECTED));
      pump.forget(id);
      if (qp) rdma_destroy_qp(id);
      ASSERT_EQ(rdma_destroy_id(id), 0);
    }
  });
}

// A listener on the shared channel and workers accepting its requests,
// while other workers run synchronous ids: both kinds of channel at once.
TEST_F(Concurrency, AcceptingWhileOthersConnectSynchronously) {
  Pump pump(channel);
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &listener, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in local = ipv4("10.0.0.1", 7471);
  ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&local)), 0);
  ASSERT_EQ(rdma_listen(listener, 64), 0);
  on_threads(6, [&](int t) {
    for (int i = 0; i < 10; ++i) {
      if (t % 2) {
        rdma_cm_id* id = nullptr;
        ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
        ASSERT_EQ(rdma_resolve_addr(id, nullptr, kPeer, 100), 0);
        ASSERT_EQ(rdma_resolve_route(id, 100), 0);
        rdma_conn_param param{};
        ASSERT_EQ(rdma_connect(id, &param), 0);
        ASSERT_EQ(rdma_destroy_id(id), 0);
        continue;
      }
      fake.queue_request(channel->fd, uid(listener));
      // Whichever request comes: the accepting threads share them.
      rdma_cm_id* id = pump.next_request();
      ASSERT_NE(id, nullptr);
      bool qp = i % 2;
      if (qp) {
        ASSERT_EQ(add_qp(id), 0);
      }
      rdma_conn_param param{};
      ASSERT_EQ(rdma_accept(id, qp ? nullptr : &param), 0);
      ASSERT_TRUE(pump.wait_for(id, RDMA_CM_EVENT_ESTABLISHED));
      ASSERT_EQ(rdma_disconnect(id), 0);
      ASSERT_TRUE(pump.wait_for(id, RDMA_CM_EVENT_DISCONNECTED));
      pump.forget(id);
      if (qp) rdma_destroy_qp(id);
      ASSERT_EQ(rdma_destroy_id(id), 0);
    }
  });
  ASSERT_EQ(rdma_destroy_id(listener), 0);
}

// rdma_destroy_id racing a reader blocked in rdma_get_cm_event on the same
// channel: the reader takes the doomed id's event before, during or after
// the destroy, at random. Whichever: no hang, nothing left.
TEST_F(Concurrency, DestroyRacingABlockedReader) {
  Pump pump(channel);
  for (int i = 0; i < 2000; ++i) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
    fake.queue_event(channel->fd, uid(id), RDMA_CM_EVENT_ADDR_CHANGE, 0);
    if (i % 3 == 0) std::this_thread::yield();
    pump.forget(id);
    ASSERT_EQ(rdma_destroy_id(id), 0);
  }
}

// The same, one interleaving forced: the reader takes the event after the
// destroy began (the id is marked dying) and before the kernel destroys it,
// so the kernel counts the event as reported and the reader must count it.
TEST_F(Concurrency, ReaderTakesTheEventAsTheDestroyBegins) {
  for (int i = 0; i < 20; ++i) {
    rdma_cm_id* doomed = nullptr;
    ASSERT_EQ(rdma_create_id(channel, &doomed, nullptr, RDMA_PS_TCP), 0);
    std::promise<void> taken;
    // Set before the reader starts: the fake reads its hooks under its lock.
    fake.on_get_event = [&] { taken.set_value(); };
    fake.on_destroy = [&] {
      fake.queue_event(channel->fd, uid(doomed), RDMA_CM_EVENT_ADDR_CHANGE, 0);
      taken.get_future().wait();
    };
    Pump pump(channel);  // blocked in rdma_get_cm_event: nothing queued yet
    ASSERT_EQ(rdma_destroy_id(doomed), 0);  // the watchdog fails a hang
    pump.stop();
    EXPECT_EQ(pump.count(doomed), 0u) << "an event of a dying id was handed out";
  }
}

// rdma_migrate_id moving ids between two channels, each read by its own
// thread, while events for the ids keep coming (from the kernel, and
// written by the application): each is delivered once, on one channel.
TEST_F(Concurrency, MigrateRacingTheReaders) {
  rdma_event_channel* other = rdma_create_event_channel();
  ASSERT_NE(other, nullptr);
  std::vector<rdma_cm_id*> ids(4);
  std::vector<size_t> resolved(ids.size()), written(ids.size());
  for (auto& id : ids) ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  {
    Pump a(channel), b(other);
    for (int round = 0; round < 200; ++round) {
      for (size_t k = 0; k < ids.size(); ++k) {
        rdma_cm_id* id = ids[k];
        // One ADDR_RESOLVED of an id in flight at a time, as from the kernel
        // (an id resolves its address once): two readers translating two of
        // one id's at once write its address from two threads, which no
        // kernel can make happen (TSan saw it in one run of this test).
        auto until = std::chrono::steady_clock::now() + test::scaled(4s);
        while (a.count(id, RDMA_CM_EVENT_ADDR_RESOLVED) + b.count(id, RDMA_CM_EVENT_ADDR_RESOLVED) <
               resolved[k]) {
          ASSERT_LT(std::chrono::steady_clock::now(), until) << "id " << k << "'s last ADDR_RESOLVED";
          std::this_thread::sleep_for(100us);
        }
        // ADDR_RESOLVED makes the reader query the kernel through the id's
        // channel while it moves.
        fake.queue_event(id->channel->fd, uid(id), RDMA_CM_EVENT_ADDR_RESOLVED, 0);
        ++resolved[k];
        if ((round + k) % 3 == 0) {
          ASSERT_EQ(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, round), 0);
          ++written[k];
        }
        ASSERT_EQ(rdma_migrate_id(id, id->channel == channel ? other : channel), 0);
      }
    }
    a.stop();  // each reader ends on a USER event queued behind all the above
    b.stop();
    for (size_t k = 0; k < ids.size(); ++k) {
      auto delivered = [&](rdma_cm_event_type type) {
        return a.count(ids[k], type) + b.count(ids[k], type);
      };
      EXPECT_EQ(delivered(RDMA_CM_EVENT_ADDR_RESOLVED), resolved[k]) << "id " << k;
      EXPECT_EQ(delivered(RDMA_CM_EVENT_USER), written[k]) << "id " << k;
      EXPECT_EQ(a.count(ids[k]) + b.count(ids[k]), resolved[k] + written[k]) << "id " << k;
    }
  }
  for (auto* id : ids) ASSERT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(other);
}

// The same for a listener: it moves between the two channels while
// connection requests for it keep coming, and each reader makes new ids for
// the requests it takes.
TEST_F(Concurrency, MigrateAListenerRacingItsRequests) {
  rdma_event_channel* other = rdma_create_event_channel();
  ASSERT_NE(other, nullptr);
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &listener, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in local = ipv4("10.0.0.1", 7471);
  ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&local)), 0);
  ASSERT_EQ(rdma_listen(listener, 64), 0);
  std::vector<rdma_cm_id*> requests;
  {
    Pump a(channel), b(other);
    for (int i = 0; i < 100; ++i) {
      fake.queue_request(listener->channel->fd, uid(listener));
      ASSERT_EQ(rdma_migrate_id(listener, listener->channel == channel ? other : channel), 0);
    }
    a.stop();
    b.stop();
    for (Pump* pump : {&a, &b})
      while (rdma_cm_id* id = pump->next_request(0ms)) requests.push_back(id);
  }
  EXPECT_EQ(requests.size(), 100u) << "each request delivered once";
  for (auto* id : requests) ASSERT_EQ(rdma_destroy_id(id), 0);
  ASSERT_EQ(rdma_destroy_id(listener), 0);
  rdma_destroy_event_channel(other);
}

// Several threads reading one channel and acknowledging, while another
// destroys the ids the events belong to (each destroy waits for the acks).
TEST_F(Concurrency, ManyThreadsReadAndAcknowledge) {
  nonblocking(channel->fd);
  std::vector<rdma_cm_id*> ids(4);
  for (auto& id : ids) ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  for (int i = 0; i < 400; ++i)
    fake.queue_event(channel->fd, uid(ids[i % ids.size()]), RDMA_CM_EVENT_ADDR_CHANGE, 0);
  std::atomic<int> acked{0};
  std::thread destroyer([&] {
    std::this_thread::sleep_for(5ms);
    for (auto* id : ids) EXPECT_EQ(rdma_destroy_id(id), 0);
  });
  on_threads(4, [&](int t) {
    std::vector<rdma_cm_event*> held;
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(channel, &ev) == 0) {
      held.push_back(ev);
      if (held.size() == static_cast<size_t>(t + 1)) {  // ack in batches of 1..4
        for (auto* e : held) EXPECT_EQ(rdma_ack_cm_event(e), 0);
        acked += static_cast<int>(held.size());
        held.clear();
      }
    }
    EXPECT_EQ(errno, EAGAIN);
    for (auto* e : held) EXPECT_EQ(rdma_ack_cm_event(e), 0);
    acked += static_cast<int>(held.size());
  });
  destroyer.join();
  EXPECT_LE(acked, 400);
}

// Two threads acknowledging the same events: each is acknowledged once, the
// other ack refused (no event is made meanwhile, so no address is reused).
TEST_F(Concurrency, DoubleAcksRaceCleanly) {
  nonblocking(channel->fd);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  std::vector<rdma_cm_event*> events;
  for (int i = 0; i < 100; ++i) {
    fake.queue_event(channel->fd, uid(id), RDMA_CM_EVENT_ADDR_CHANGE, 0);
    rdma_cm_event* ev = nullptr;
    ASSERT_EQ(rdma_get_cm_event(channel, &ev), 0);
    events.push_back(ev);
  }
  std::atomic<int> ok{0}, refused{0};
  on_threads(2, [&](int) {
    for (auto* ev : events) {
      if (rdma_ack_cm_event(ev) == 0)
        ++ok;
      else if (errno == EINVAL)
        ++refused;
    }
  });
  EXPECT_EQ(ok, 100);
  EXPECT_EQ(refused, 100);
  ASSERT_EQ(rdma_destroy_id(id), 0);
}

// Channels made and destroyed on many threads, each destroyed while its ids
// still live (they keep its fd), and synchronous ids alongside; then two
// threads destroying the same ids: each goes once, the other call refused.
TEST_F(Concurrency, ChannelsAndIdsComeAndGo) {
  on_threads(6, [](int) {
    for (int i = 0; i < 20; ++i) {
      rdma_event_channel* ch = rdma_create_event_channel();
      ASSERT_NE(ch, nullptr);
      rdma_cm_id* ids[3];
      for (auto& id : ids) ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), 0);
      rdma_destroy_event_channel(ch);
      rdma_cm_id* sync = nullptr;
      ASSERT_EQ(rdma_create_id(nullptr, &sync, nullptr, RDMA_PS_TCP), 0);
      for (auto* id : ids) ASSERT_EQ(rdma_destroy_id(id), 0);
      ASSERT_EQ(rdma_destroy_id(sync), 0);
    }
  });
  std::vector<rdma_cm_id*> ids(50);
  for (auto& id : ids) ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  std::atomic<int> ok{0}, refused{0};
  on_threads(2, [&](int) {
    for (auto* id : ids) {
      if (rdma_destroy_id(id) == 0)
        ++ok;
      else if (errno == EINVAL)
        ++refused;
    }
  });
  EXPECT_EQ(ok, 50);
  EXPECT_EQ(refused, 50);
}

}  // namespace
}  // namespace rdmacm::testing
