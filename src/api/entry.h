// Shared by the extern "C" entry points: export marker and the conversion of
// core results (0 / value / -errno, or a C++ exception) into C conventions.
// No exception ever crosses into the application.
#pragma once

#include <cerrno>
#include <new>
#include <sys/types.h>

#define RDMACM_EXPORT extern "C" __attribute__((visibility("default")))

namespace rdmacm::api {

inline int fail(int err) {
  errno = err;
  return -1;
}

// Runs a core call returning >= 0 or -errno; returns -1 with errno set on error.
template <typename F>
int call(F&& f) noexcept {
  try {
    int r = f();
    // -r without overflow: an event status of INT_MIN (no kernel's, but the
    // core passes statuses through) gives errno INT_MIN, as rdma-core's
    // -status wraps to.
    return r < 0 ? fail(static_cast<int>(0u - static_cast<unsigned>(r))) : r;
  } catch (const std::bad_alloc&) {
    return fail(ENOMEM);
  } catch (...) {
    return fail(EIO);
  }
}

// The same for calls returning a byte count (ssize_t).
template <typename F>
ssize_t call_ssize(F&& f) noexcept {
  try {
    ssize_t r = f();
    if (r >= 0) return r;
    errno = static_cast<int>(-r);
    return -1;
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
    return -1;
  } catch (...) {
    errno = EIO;
    return -1;
  }
}

}  // namespace rdmacm::api
