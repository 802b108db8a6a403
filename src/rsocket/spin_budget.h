// How long a blocking caller looks before it sleeps (rdma-core 44 spins a
// fixed polling_time, 10 us by default, then pays a sleep and a wake-up:
// 50-190 us under Soft-RoCE, several times the round trip it waited for).
//
// Here the spin covers the longest of the caller's recent waits: a wait that
// ended within 2 kMaxSpinUs asks for twice its length (at most kMaxSpinUs;
// a wait that slept also counts its wake-up). A longer ask raises the budget
// at once; a shorter one lowers it by a sixteenth of the difference (a wait
// answered at once says nothing of the next one: measured under Soft-RoCE,
// a moving average of every ask sat at polling_time for half the waits of a
// blocking ping-pong, and a quarter of them slept). A wait longer than
// 2 kMaxSpinUs takes a quarter off: spinning would not have caught it. Never
// below polling_time, never above kMaxSpinUs. A caller answered within a
// round trip stops sleeping; an idle one spins at most kMaxSpinUs once per
// wait and then sleeps (its budget decays to polling_time), so it costs no
// CPU while nothing comes. With one CPU online the look stays at
// polling_time: a peer on the same host needs the CPU the spin would hold.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "rsocket/config.h"

namespace rdmacm::rsocket {

class SpinBudget {
 public:
  static constexpr uint64_t kMaxSpinUs = 200;

  explicit SpinBudget(long cpus = online_cpus()) : cap_(cpus == 1 ? 0 : kMaxSpinUs) {}

  // Microseconds to look before sleeping.
  uint64_t us() const {
    return std::max<uint64_t>(config().polling_time,
                              std::min(cap_, budget_.load(std::memory_order_relaxed)));
  }

  // A wait that ended after waited_us (spinning or sleeping).
  void learn(uint64_t waited_us) {
    uint64_t b = budget_.load(std::memory_order_relaxed);
    if (waited_us > 2 * kMaxSpinUs) {
      b -= b / 4;
    } else {
      uint64_t ask = std::min(2 * waited_us, kMaxSpinUs);
      b = ask > b ? ask : b - (b - ask + 15) / 16;
    }
    // Racing callers may lose a lesson: it is only a hint.
    budget_.store(b, std::memory_order_relaxed);
  }

 private:
  static long online_cpus() {
    static const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n;
  }

  uint64_t cap_;
  std::atomic<uint64_t> budget_{0};
};

}  // namespace rdmacm::rsocket
