#include "trace.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "real_calls.h"

namespace rspreload {
namespace {

int out = -1;
pthread_once_t once = PTHREAD_ONCE_INIT;

void open_trace() {
  int saved = errno;
  const char* v = getenv("RDMACM_TRACE");
  if (v && *v && strcmp(v, "0")) {
    out = strcmp(v, "1") ? open(v, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : 2;
    // Out of the program's way: a number it does not count on.
    if (out > 2) {
      int high = real::fcntl(out, F_DUPFD_CLOEXEC, 512);
      if (high >= 0) {
        real::close(out);
        out = high;
      }
    }
  }
  errno = saved;
}

}  // namespace

bool tracing() {
  pthread_once(&once, open_trace);
  return out >= 0;
}

void trace(const char* fmt, ...) {
  if (!tracing()) return;
  int saved = errno;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char buf[512];
  int n = snprintf(buf, sizeof buf - 1, "rspreload %ld.%06ld [%ld] ", static_cast<long>(ts.tv_sec),
                   ts.tv_nsec / 1000, static_cast<long>(syscall(SYS_gettid)));
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - 1 - n, fmt, ap);
  va_end(ap);
  n += m < 0 ? 0 : m < static_cast<int>(sizeof buf - 1 - n) ? m : static_cast<int>(sizeof buf - 2 - n);
  buf[n++] = '\n';
  ssize_t w = real::write(out, buf, n);
  (void)w;
  errno = saved;
}

const char* addr_text(const sockaddr* a, socklen_t len, char* buf) {
  char ip[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (a && a->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    auto* in = reinterpret_cast<const sockaddr_in*>(a);
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    port = ntohs(in->sin_port);
    snprintf(buf, 80, "%s port %u", ip, port);
  } else if (a && a->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(a);
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    port = ntohs(in6->sin6_port);
    snprintf(buf, 80, "[%s] port %u", ip, port);
  } else {
    snprintf(buf, 80, "an address of family %d", a ? a->sa_family : -1);
  }
  return buf;
}

}  // namespace rspreload
