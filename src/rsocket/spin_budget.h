// How long a blocking caller looks before it sleeps (rdma-core 44 spins a
// fixed polling_time, 10 us by default, then pays a sleep and a wake-up:
// 50-190 us under Soft-RoCE, several times the round trip it waited for).
//
// Here the spin follows what the caller's recent waits took: a wait that
// ended within 2 kMaxSpinUs teaches "spin twice that long" (at most
// kMaxSpinUs: a wait that slept also counts its wake-up), a longer one
// teaches "do not spin"; the budget is a moving average of those lessons,
// never below polling_time and never above kMaxSpinUs. A caller answered
// within a round trip stops sleeping; an idle one spins at most kMaxSpinUs
// once per wait and then sleeps (its budget decays to polling_time), so it
// costs no CPU while nothing comes.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "rsocket/config.h"

namespace rdmacm::rsocket {

class SpinBudget {
 public:
  static constexpr uint64_t kMaxSpinUs = 200;

  // Microseconds to look before sleeping.
  uint64_t us() const {
    return std::max<uint64_t>(config().polling_time, budget_.load(std::memory_order_relaxed));
  }

  // A wait that ended after waited_us (spinning or sleeping).
  void learn(uint64_t waited_us) {
    uint64_t lesson = waited_us <= 2 * kMaxSpinUs ? std::min(2 * waited_us, kMaxSpinUs) : 0;
    uint64_t b = budget_.load(std::memory_order_relaxed);
    // Racing callers may lose a lesson: it is only a hint.
    budget_.store((3 * b + lesson) / 4, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> budget_{0};
};

}  // namespace rdmacm::rsocket
