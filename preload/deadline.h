// A point in time (CLOCK_MONOTONIC) and what is left of it, for the
// preload's bounded waits: the fork-mode move's on its peer (fork_peer.h), a
// blocking accept's SO_RCVTIMEO (listener.cpp).
#pragma once

#include <sys/time.h>
#include <time.h>

#include <climits>

namespace rspreload {

struct Deadline {
  timespec at;

  static Deadline in(int ms) { return after(ms / 1000, (ms % 1000) * 1000000L); }
  static Deadline after(const timeval& tv) { return after(tv.tv_sec, tv.tv_usec * 1000L); }

  // 0 once passed; a wait of 24 days or more reads as INT_MAX (poll's int).
  int left_ms() const {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long sec = static_cast<long long>(at.tv_sec) - now.tv_sec;
    if (sec >= INT_MAX / 1000) return INT_MAX;
    long long ns = sec * 1000000000LL + (at.tv_nsec - now.tv_nsec);
    return ns <= 0 ? 0 : static_cast<int>((ns + 999999) / 1000000);
  }

 private:
  static Deadline after(time_t sec, long nsec) {
    constexpr time_t kFar = time_t{1} << 30;  // 34 years: no overflow past it
    if (sec > kFar) sec = kFar;
    Deadline d;
    clock_gettime(CLOCK_MONOTONIC, &d.at);
    d.at.tv_sec += sec + nsec / 1000000000L;
    d.at.tv_nsec += nsec % 1000000000L;
    if (d.at.tv_nsec >= 1000000000L) {
      d.at.tv_sec++;
      d.at.tv_nsec -= 1000000000L;
    }
    return d;
  }
};

}  // namespace rspreload
