// SO_RCVTIMEO and SO_SNDTIMEO: how long a blocking receive or send waits
// before it gives up with EAGAIN (none: for ever), set and read as the
// kernel's sock_set_timeout / sock_get_timeout do: a struct timeval, a
// tv_usec outside [0, 1000000) EDOM, a negative tv_sec no wait at all
// (the kernel's 0 jiffies: EAGAIN at once), a short length EINVAL; a short
// room to read takes the value's first bytes.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>

#include "rsocket/caller_memory.h"
#include "rsocket/clock.h"

namespace rdmacm::rsocket {

class Timeouts {
 public:
  static constexpr uint64_t kNone = 0;       // wait for ever
  static constexpr uint64_t kAtOnce = ~0ull;  // a negative tv_sec

  static bool handles(int level, int name) {
    return level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO);
  }

  int set(int name, const void* value, socklen_t len) {
    if (!value) return -EFAULT;
    if (len < sizeof(timeval)) return -EINVAL;
    timeval tv;
    if (int err = copy_from_caller(&tv, value, sizeof(tv))) return err;
    if (tv.tv_usec < 0 || tv.tv_usec >= 1000000) return -EDOM;
    uint64_t us = tv.tv_sec < 0 ? kAtOnce
                                : static_cast<uint64_t>(tv.tv_sec) * 1000000 +
                                      static_cast<uint64_t>(tv.tv_usec);
    slot(name).store(us, std::memory_order_relaxed);
    return 0;
  }

  int get(int name, void* value, socklen_t* len) const {
    uint64_t us = slot(name).load(std::memory_order_relaxed);
    timeval tv{};
    if (us != kAtOnce) {
      tv.tv_sec = static_cast<time_t>(us / 1000000);
      tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
    }
    return give_option(&tv, sizeof(tv), value, len);
  }

  // In microseconds: kNone, kAtOnce, or the time.
  uint64_t receive_us() const { return rcv_us_.load(std::memory_order_relaxed); }
  uint64_t send_us() const { return snd_us_.load(std::memory_order_relaxed); }

  // A bounded wait's end on now_us()'s clock, for one of the times above: 0
  // for none (kNone), now for kAtOnce.
  static uint64_t deadline(uint64_t us) {
    if (us == kNone) return 0;
    uint64_t now = now_us();
    return us == kAtOnce ? now : now + std::min<uint64_t>(us, ~uint64_t{0} - now);
  }
  // What poll(2) may wait of it: -1 for none, 0 once it passed, at most
  // INT_MAX ms (a longer wait polls again).
  static int poll_ms(uint64_t deadline) {
    if (!deadline) return -1;
    uint64_t now = now_us();
    if (now >= deadline) return 0;
    return static_cast<int>(std::min<uint64_t>((deadline - now + 999) / 1000, INT_MAX));
  }

 private:
  std::atomic<uint64_t>& slot(int name) { return name == SO_RCVTIMEO ? rcv_us_ : snd_us_; }
  const std::atomic<uint64_t>& slot(int name) const {
    return name == SO_RCVTIMEO ? rcv_us_ : snd_us_;
  }

  std::atomic<uint64_t> rcv_us_{kNone}, snd_us_{kNone};
};

}  // namespace rdmacm::rsocket
