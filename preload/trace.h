// RDMACM_TRACE for the preload: what it decided on its own, which a program
// cannot see (a connection on kernel TCP instead of RDMA, a listener that
// listens on RDMA only). Read as librdmacm reads it (core/trace.h, which the
// preload may not include): unset, empty or "0" off, "1" stderr, any other
// value a file appended to. One line per call, written whole.
#pragma once

#include <sys/socket.h>

namespace rspreload {

bool tracing();

// A line "rspreload <time> [<tid>] <message>" when tracing.
void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// "a.b.c.d port p" / "[::1] port p" for a trace line (`buf` of 80 bytes).
const char* addr_text(const sockaddr* a, socklen_t len, char* buf);

}  // namespace rspreload
