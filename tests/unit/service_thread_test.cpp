// The wing's one background-thread mechanism (src/rsocket/service_thread.h):
// readable fds reach on_ready, timers fall due in order and repeat while
// on_due asks, and once unwatch or cancel returns the thread no longer
// touches the socket, even when cancel races a running timer.
#include "rsocket/service_thread.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "../common/time_scale.h"

namespace rdmacm::rsocket {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Fake {
  int pipe_fds[2] = {-1, -1};
  std::atomic<int> ready{0}, due{0}, repeats{0};
  std::atomic<bool> in_due{false}, slow{false};
  int fd() const { return pipe_fds[0]; }
  Fake() { EXPECT_EQ(pipe2(pipe_fds, O_NONBLOCK), 0); }
  ~Fake() {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
  }
};

void on_ready(Fake* f) {
  char c;
  while (::read(f->pipe_fds[0], &c, 1) > 0) {
  }
  ++f->ready;
}

Clock::time_point on_due(Fake* f, int) {
  f->in_due = true;
  if (f->slow) std::this_thread::sleep_for(50ms);
  ++f->due;
  f->in_due = false;
  return f->repeats-- > 0 ? Clock::now() + 1ms : Clock::time_point{};
}

template <typename Pred>
bool eventually(Pred p) {
  auto until = Clock::now() + std::chrono::milliseconds(test::scaled_ms(5000));
  while (!p()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(ServiceThread, AReadableFdReachesOnReadyUntilUnwatched) {
  static ServiceThread<Fake> service(on_ready, on_due);
  Fake f;
  ASSERT_EQ(service.watch(&f), 0);
  ASSERT_EQ(::write(f.pipe_fds[1], "x", 1), 1);
  EXPECT_TRUE(eventually([&] { return f.ready == 1; }));
  service.unwatch(&f);
  ASSERT_EQ(::write(f.pipe_fds[1], "x", 1), 1);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.ready, 1);
}

TEST(ServiceThread, ATimerRepeatsWhileOnDueAsksAndRescheduleReplacesIt) {
  static ServiceThread<Fake> service(on_ready, on_due);
  Fake f;
  f.repeats = 3;
  auto t0 = Clock::now();
  ASSERT_EQ(service.schedule(&f, 0, t0 + 30ms), 0);
  ASSERT_EQ(service.schedule(&f, 0, t0 + 60ms), 0);  // replaces, not a second timer
  EXPECT_TRUE(eventually([&] { return f.due == 4; }));
  EXPECT_GE(Clock::now() - t0, 60ms);  // never before it is due
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(f.due, 4);  // dropped once on_due said so
  service.cancel(&f, 0);  // f goes: wait for an on_due still returning
}

TEST(ServiceThread, CancelWaitsForARunningTimerAndKeepsItCancelled) {
  static ServiceThread<Fake> service(on_ready, on_due);
  Fake f;
  f.slow = true;
  f.repeats = 1000;
  ASSERT_EQ(service.schedule(&f, 1, Clock::now()), 0);
  ASSERT_TRUE(eventually([&] { return f.in_due.load(); }));
  service.cancel(&f, 1);
  EXPECT_FALSE(f.in_due);  // cancel returned only after on_due ended
  int seen = f.due;
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(f.due, seen);  // and it did not come back
}

// What an accepting listener does (stream_service.cpp): its handler watches
// a new socket and sets that one's timer, and the new socket's handler
// cancels its timer and unwatches itself, all on the service's own thread.
struct Nested : Fake {
  static ServiceThread<Nested>& service();
  Nested* child = nullptr;
  std::atomic<bool> child_done{false}, in_ready{false};
};

void nested_ready(Nested* n) {
  char c;
  while (::read(n->pipe_fds[0], &c, 1) > 0) {
  }
  n->in_ready = true;
  if (n->slow) std::this_thread::sleep_for(50ms);
  if (n->child) {  // the parent: watch the child, with a deadline far off
    EXPECT_EQ(Nested::service().schedule(n->child, 7, Clock::now() + 1h), 0);
    EXPECT_EQ(Nested::service().watch(n->child), 0);
    EXPECT_EQ(::write(n->child->pipe_fds[1], "x", 1), 1);
  } else if (!n->child_done) {  // the child: its handshake ended
    Nested::service().cancel(n, 7);
    Nested::service().unwatch(n);
    n->child_done = true;
  }
  ++n->ready;
  n->in_ready = false;
}

ServiceThread<Nested>& Nested::service() {
  static ServiceThread<Nested> s(nested_ready, [](Nested*, int) { return Clock::time_point{}; });
  return s;
}

TEST(ServiceThread, AHandlerMayWatchScheduleCancelAndUnwatchOnItsOwnService) {
  Nested parent, child;
  parent.child = &child;
  ASSERT_EQ(Nested::service().watch(&parent), 0);
  ASSERT_EQ(::write(parent.pipe_fds[1], "x", 1), 1);
  EXPECT_TRUE(eventually([&] { return child.child_done.load(); }));
  ASSERT_EQ(::write(child.pipe_fds[1], "x", 1), 1);  // unwatched: not seen again
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(child.ready, 1);
  Nested::service().unwatch(&parent);
}

TEST(ServiceThread, UnwatchWaitsForARunningHandler) {
  Nested n;
  n.slow = true;
  n.child_done = true;  // a plain socket
  ASSERT_EQ(Nested::service().watch(&n), 0);
  ASSERT_EQ(::write(n.pipe_fds[1], "x", 1), 1);
  ASSERT_TRUE(eventually([&] { return n.in_ready.load(); }));
  Nested::service().unwatch(&n);
  EXPECT_FALSE(n.in_ready);  // unwatch returned only after on_ready ended
}

}  // namespace
}  // namespace rdmacm::rsocket
