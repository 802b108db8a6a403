// RDMACM_TRACE: a line for every call (its result and errno) and every event
// the kernel reports (its id, type, status, and what the library made of it),
// each with a timestamp and thread id. RDMACM_TRACE=1 writes to stderr, any
// other value names a file to append to. Off, it costs one load and branch
// per call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>

struct rdma_cm_event;

namespace rdmacm::core {

extern bool trace_on;

// `name`: the entry point (api::call passes __builtin_FUNCTION()).
void trace_call(const char* name, long result, int err);
// The kernel's event (`kernel_type` for `kernel_id`) and what the
// application gets: `delivered` (null when the library consumed or dropped it).
void trace_event(uint32_t kernel_type, uint32_t kernel_id, const rdma_cm_event* delivered);
// trace_rsocket is declared in cm.h, for the rsocket wing.
// For tests: trace to `out` (null: off).
void set_trace(FILE* out);

}  // namespace rdmacm::core
