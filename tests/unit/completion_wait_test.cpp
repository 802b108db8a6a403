// The completion wait both rsocket kinds use (src/rsocket/completion_wait.h),
// against a CQ model with a real CQ's notification rule: arming asks for
// one event at the next completion; completions already queued raise none,
// and an event taken disarms the CQ. A sender and a receiver of one socket
// block at the same time while completions arrive in every interleaving:
// each must see every completion meant for it, none may sleep for ever
// (a sleeper on a CQ another thread disarmed, or the two locks taken in
// opposite orders), and a timed wait must end on time.
#include "rsocket/completion_wait.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <time.h>

#include <gtest/gtest.h>

#include "../common/time_scale.h"

namespace rdmacm::rsocket {
namespace {

// A CQ and its completion channel.
class ModelCq {
 public:
  ModelCq() : channel_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~ModelCq() { ::close(channel_); }

  enum Kind { kSendDone, kData };
  void complete(Kind k) {
    std::lock_guard lock(mutex_);
    queue_.push_back(k);
    if (armed_) {
      armed_ = false;
      uint64_t one = 1;
      EXPECT_EQ(::write(channel_, &one, sizeof(one)), 8);
    }
  }
  bool poll(Kind* k) {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return false;
    *k = queue_.front();
    queue_.pop_front();
    return true;
  }
  void arm() {
    std::lock_guard lock(mutex_);
    armed_ = true;
  }
  // Events taken: 0 if none came within ms.
  int get_event(int ms) {
    pollfd p{channel_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return 0;
    uint64_t n = 0;
    return ::read(channel_, &n, sizeof(n)) == 8 ? static_cast<int>(n) : 0;
  }

 private:
  std::mutex mutex_;
  std::deque<Kind> queue_;
  bool armed_ = false;
  int channel_;
};

class ModelSocket : public CompletionWait<ModelSocket> {
 public:
  explicit ModelSocket(ModelCq& cq) : cq_(cq) {}

  // The receiver: one message (blocking).
  int take_message() {
    if (int err = wait(&ModelSocket::have_data, false)) return err;
    std::lock_guard lock(cq_mutex_);
    --messages_;
    return 0;
  }
  // The sender: one send slot (blocking).
  int take_slot() {
    if (int err = wait(&ModelSocket::have_room, false)) return err;
    std::lock_guard lock(cq_mutex_);
    --slots_;
    return 0;
  }
  bool wait_for_message_ms(int ms) { return wait_ms(&ModelSocket::have_data, ms); }

 private:
  friend class CompletionWait<ModelSocket>;
  int reap() {
    ModelCq::Kind k;
    while (cq_.poll(&k)) ++(k == ModelCq::kData ? messages_ : slots_);
    return 0;
  }
  void arm() { cq_.arm(); }
  int sleep_on_cq(int ms) { return cq_.get_event(ms); }
  bool have_data() const { return messages_ > 0; }
  bool have_room() const { return slots_ > 0; }

  ModelCq& cq_;
  int messages_ = 0, slots_ = 0;  // cq_mutex_
};

TEST(CompletionWait, ASenderAndAReceiverBlockingTogetherEachGetTheirCompletions) {
  constexpr int kEach = 20000;
  ModelCq cq;
  ModelSocket s(cq);
  std::atomic<int> received{0}, sent{0};
  std::thread receiver([&] {
    for (int i = 0; i < kEach; ++i) {
      ASSERT_EQ(s.take_message(), 0);
      ++received;
    }
  });
  std::thread sender([&] {
    for (int i = 0; i < kEach; ++i) {
      ASSERT_EQ(s.take_slot(), 0);
      ++sent;
    }
  });
  // Completions in a random order, now and then with a pause so that both
  // threads fall asleep.
  std::mt19937 rng(42);
  int data = 0, done = 0;
  while (data < kEach || done < kEach) {
    bool d = done == kEach || (data < kEach && rng() % 2);
    cq.complete(d ? ModelCq::kData : ModelCq::kSendDone);
    ++(d ? data : done);
    if (rng() % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
  }
  // Every completion was handed out: both threads end (a lost wake-up or a
  // lock-order deadlock leaves one asleep, and the watchdog fails the run).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(test::scaled_ms(20000));
  while ((received < kEach || sent < kEach) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(received.load(), kEach);
  EXPECT_EQ(sent.load(), kEach);
  if (received < kEach || sent < kEach) {
    // Stuck: free the threads so the test can report instead of hanging.
    for (int i = 0; i < kEach; ++i) {
      cq.complete(ModelCq::kData);
      cq.complete(ModelCq::kSendDone);
    }
  }
  receiver.join();
  sender.join();
}

TEST(CompletionWait, ATimedWaitEndsOnTimeAndSeesACompletionThatCame) {
  ModelCq cq;
  ModelSocket s(cq);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s.wait_for_message_ms(150));
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cq.complete(ModelCq::kData);
  });
  EXPECT_TRUE(s.wait_for_message_ms(test::scaled_ms(10000)));
  later.join();
}

// The spin before a sleep covers the longest recent waits (spin_budget.h).
TEST(SpinBudget, CoversTheLongestRecentWaitAndDecaysWhenWaitsAreLong) {
  SpinBudget b(2);
  uint64_t floor = config().polling_time;
  EXPECT_EQ(b.us(), floor);
  b.learn(30);  // a 30 us round trip: spin twice that, at once
  EXPECT_EQ(b.us(), 60u);
  b.learn(150);  // twice that is past the cap
  EXPECT_EQ(b.us(), SpinBudget::kMaxSpinUs);
  // Waits answered at once lower it slowly: the next may be long again.
  for (int i = 0; i < 8; ++i) b.learn(1);
  EXPECT_GE(b.us(), 100u);
  EXPECT_LT(b.us(), SpinBudget::kMaxSpinUs);
  for (int i = 0; i < 200; ++i) b.learn(1);
  EXPECT_EQ(b.us(), floor);
  for (int i = 0; i < 40; ++i) b.learn(100);
  EXPECT_EQ(b.us(), SpinBudget::kMaxSpinUs);
  for (int i = 0; i < 40; ++i) b.learn(5'000'000);  // an idle peer: not worth a spin
  EXPECT_EQ(b.us(), floor);
}

// Once at polling_time, one wait that slept through a round trip (its
// wake-up included) brings the whole spin back: no settling at "no spin".
TEST(SpinBudget, OneMissedRoundTripRestoresTheSpin) {
  SpinBudget b(2);
  for (int i = 0; i < 40; ++i) b.learn(5'000'000);
  ASSERT_EQ(b.us(), config().polling_time);
  b.learn(250);  // a 100 us reply, slept for: 250 us with the wake-up
  EXPECT_EQ(b.us(), SpinBudget::kMaxSpinUs);
}

// One CPU: a spin would hold the CPU a peer on this host needs to answer,
// so the look stays at polling_time, as rdma-core's.
TEST(SpinBudget, WithOneCpuTheLookStaysAtPollingTime) {
  SpinBudget b(1);
  for (int i = 0; i < 40; ++i) b.learn(30);
  EXPECT_EQ(b.us(), config().polling_time);
  SpinBudget two(2);
  for (int i = 0; i < 40; ++i) two.learn(30);
  EXPECT_EQ(two.us(), 60u);
}

// A reader blocked on a peer that sends nothing spins once, then sleeps: it
// costs (almost) no CPU, whatever its budget learnt before.
TEST(CompletionWait, AnIdleBlockedReaderSleepsInsteadOfSpinning) {
  ModelCq cq;
  ModelSocket s(cq);
  std::atomic<bool> got{false};
  std::atomic<uint64_t> cpu_us{0};
  std::thread reader([&] {
    for (int i = 0; i < 2; ++i) {  // first a quick one: the budget grows
      ASSERT_EQ(s.take_message(), 0);
    }
    timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    ASSERT_EQ(s.take_message(), 0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    cpu_us = static_cast<uint64_t>((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000);
    got = true;
  });
  cq.complete(ModelCq::kData);
  cq.complete(ModelCq::kData);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the idle time being measured
  cq.complete(ModelCq::kData);
  reader.join();
  EXPECT_TRUE(got);
  // A second of idle time: at most one spin (SpinBudget::kMaxSpinUs) and a
  // wake-up; a busy-polling reader would take ~1,000,000 us.
  EXPECT_LT(cpu_us.load(), 50'000u);
}

}  // namespace
}  // namespace rdmacm::rsocket
