// A per-test deadline for GoogleTest binaries: a test that hangs (a destroy
// waiting forever, an event that never comes) fails by name after
// RDMACM_TEST_TIMEOUT seconds (default 60) times time_scale() (time_scale.h:
// sanitizers, RDMACM_TIME_SCALE) instead of stalling the suite.
// Linked into a test binary, it installs itself before main runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "time_scale.h"

namespace {

// Shared with the watchdog thread and never destroyed: the thread outlives
// main, and destroying a condition variable with a waiter would block exit.
struct State {
  std::chrono::seconds limit{60};
  std::mutex mutex;
  std::condition_variable cv;
  std::chrono::steady_clock::time_point deadline;
  std::string name;
  bool armed = false;
};

[[noreturn]] void watch(State* s) {
  std::unique_lock lock(s->mutex);
  for (;;) {
    if (!s->armed) {
      s->cv.wait(lock);
      continue;
    }
    s->cv.wait_until(lock, s->deadline);
    if (s->armed && std::chrono::steady_clock::now() >= s->deadline) {
      std::fprintf(stderr, "\n[  TIMEOUT ] %s did not finish within %lld s: failing\n",
                   s->name.c_str(), static_cast<long long>(s->limit.count()));
      std::fflush(stderr);
      _exit(3);
    }
  }
}

class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  Watchdog() : s_(new State) {
    if (const char* env = std::getenv("RDMACM_TEST_TIMEOUT"))
      s_->limit = std::chrono::seconds(std::atoi(env));
    s_->limit = std::chrono::duration_cast<std::chrono::seconds>(
        rdmacm::test::scaled(s_->limit) + std::chrono::milliseconds(999));
    std::thread(watch, s_).detach();
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard lock(s_->mutex);
    s_->name = std::string(info.test_suite_name()) + "." + info.name();
    s_->deadline = std::chrono::steady_clock::now() + s_->limit;
    s_->armed = true;
    s_->cv.notify_all();
  }

  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard lock(s_->mutex);
    s_->armed = false;
  }

 private:
  State* s_;
};

const bool installed = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog);
  return true;
}();

}  // namespace
