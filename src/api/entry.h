// Shared by the extern "C" entry points: export marker and the conversion of
// core results (0 / value / -errno, or a C++ exception) into C conventions.
// No exception ever crosses into the application.
#pragma once

#include <cerrno>
#include <new>
#include <sys/types.h>

#include "core/trace.h"

#define RDMACM_EXPORT extern "C" __attribute__((visibility("default")))

namespace rdmacm::api {

inline int fail(int err) {
  errno = err;
  return -1;
}

// Runs a core call returning >= 0 or -errno; returns -1 with errno set on
// error. `where` names the entry point for RDMACM_TRACE (core/trace.h).
template <typename F>
int call(F&& f, const char* where = __builtin_FUNCTION()) noexcept {
  int r;
  try {
    r = f();
    // -r without overflow: an event status of INT_MIN (no kernel's, but the
    // core passes statuses through) gives errno INT_MIN, as rdma-core's
    // -status wraps to.
    r = r < 0 ? fail(static_cast<int>(0u - static_cast<unsigned>(r))) : r;
  } catch (const std::bad_alloc&) {
    r = fail(ENOMEM);
  } catch (...) {
    r = fail(EIO);
  }
  if (core::trace_on) core::trace_call(where, r, errno);
  return r;
}

// The same for calls returning a byte count (ssize_t).
template <typename F>
ssize_t call_ssize(F&& f, const char* where = __builtin_FUNCTION()) noexcept {
  ssize_t r;
  try {
    r = f();
    if (r < 0) {
      errno = static_cast<int>(-r);
      r = -1;
    }
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
    r = -1;
  } catch (...) {
    errno = EIO;
    r = -1;
  }
  if (core::trace_on) core::trace_call(where, r, errno);
  return r;
}

}  // namespace rdmacm::api
