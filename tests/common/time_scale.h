// One factor for every wall-clock bound in the C++ tests that says how long
// something may take ("the event comes within 5 s", "rclose returns within
// 1 s"): bounds are tuned on a quiet host, and a sanitizer or a loaded host
// makes the same correct code slower. A test scales such a bound with
// scaled(); it never scales a bound that says how long something must at
// least take (a timeout of the library's must not end early), nor a window in
// which nothing may happen (a longer one only looks harder).
//
//   time_scale() = the build's factor x RDMACM_TIME_SCALE
//
// The build's factor: 3 under AddressSanitizer (the RDMACM_SANITIZE build,
// ASan with UBSan), 2 under UBSan alone (clang), 5 under ThreadSanitizer
// (RDMACM_TSAN), else 1. RDMACM_TIME_SCALE is a factor for a slow or loaded
// host, a decimal number >= 1 ("2", "1.5"); unset or empty means 1, anything
// else is refused with a message on stderr (and 1). The Soft-RoCE VM starts
// its command with a clean environment: pass it in with `rxe-vm run --env`.
//
// The watchdog (watchdog.cpp) scales RDMACM_TEST_TIMEOUT by it too.
// Header-only: each test binary includes it from tests/common/.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define RDMACM_TEST_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define RDMACM_TEST_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RDMACM_TEST_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define RDMACM_TEST_TSAN 1
#endif
#if __has_feature(undefined_behavior_sanitizer)
#define RDMACM_TEST_UBSAN 1
#endif
#endif

namespace rdmacm::test {

// The build's own factor (see above).
constexpr double build_time_scale() {
#if defined(RDMACM_TEST_TSAN)
  return 5;
#elif defined(RDMACM_TEST_ASAN)
  return 3;
#elif defined(RDMACM_TEST_UBSAN)
  return 2;
#else
  return 1;
#endif
}

// RDMACM_TIME_SCALE parsed (1 if unset, empty or refused).
inline double env_time_scale() {
  const char* v = std::getenv("RDMACM_TIME_SCALE");
  if (!v || !*v) return 1;
  char* end = nullptr;
  double f = std::strtod(v, &end);
  if (*end || !std::isfinite(f) || f < 1 || f > 1000) {
    std::fprintf(stderr, "RDMACM_TIME_SCALE=%s: not a factor from 1 to 1000; using 1\n", v);
    return 1;
  }
  return f;
}

inline double time_scale() {
  static const double scale = build_time_scale() * env_time_scale();
  return scale;
}

// A bound on how long something may take, made longer by time_scale().
template <class Rep, class Period>
std::chrono::milliseconds scaled(std::chrono::duration<Rep, Period> bound) {
  auto ms = std::chrono::duration<double, std::milli>(bound).count() * time_scale();
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(ms)));
}

// The same for a bound in milliseconds (poll(2)'s timeout) ...
inline int scaled_ms(int ms) { return static_cast<int>(scaled(std::chrono::milliseconds(ms)).count()); }

// ... and in seconds.
inline double scaled_s(double s) { return s * time_scale(); }

}  // namespace rdmacm::test
