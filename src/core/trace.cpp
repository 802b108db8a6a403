#include "core/trace.h"

#include <rdma/rdma_cma.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

#include "core/cm.h"

namespace rdmacm::core {

bool trace_on = false;

namespace {

FILE* trace_out;

[[gnu::constructor]] void trace_from_environment() {
  const char* v = std::getenv("RDMACM_TRACE");
  if (!v || !*v || !std::strcmp(v, "0")) return;
  FILE* f = std::strcmp(v, "1") ? std::fopen(v, "ae") : stderr;
  if (!f) {
    std::fprintf(stderr, "librdmacm: RDMACM_TRACE: cannot open %s: %s\n", v, std::strerror(errno));
    return;
  }
  if (f != stderr) setvbuf(f, nullptr, _IOLBF, 0);
  set_trace(f);
}

// One line, written whole (stdio's stream lock), prefixed with the time and
// the thread.
template <typename... Args>
void line(const char* fmt, Args... args) {
  FILE* out = trace_out;
  if (!out) return;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "rdmacm %ld.%06ld [%ld] ", static_cast<long>(ts.tv_sec),
                        ts.tv_nsec / 1000, static_cast<long>(syscall(SYS_gettid)));
  std::snprintf(buf + n, sizeof buf - n, fmt, args...);
  std::fprintf(out, "%s\n", buf);
}

}  // namespace

void set_trace(FILE* out) {
  trace_out = out;
  trace_on = out != nullptr;
}

void trace_call(const char* name, long result, int err) {
  int saved = errno;
  if (result < 0)
    line("%s = %ld errno %d (%s)", name, result, err, std::strerror(err));
  else
    line("%s = %ld", name, result);
  errno = saved;
}

void trace_rsocket(int fd, const char* what, int err) {
  if (!trace_on) return;
  int saved = errno;
  line("rsocket %d: %s (%s)", fd, what, std::strerror(err));
  errno = saved;
}

void trace_event(uint32_t kernel_type, uint32_t kernel_id, const rdma_cm_event* delivered) {
  int saved = errno;
  if (!delivered)
    line("event %s (kernel id %u) consumed or dropped by the library", event_name(kernel_type),
         kernel_id);
  else
    line("event %s status %d id %p%s%s", event_name(delivered->event), delivered->status,
         static_cast<void*>(delivered->id),
         delivered->event != kernel_type ? " from kernel " : "",
         delivered->event != kernel_type ? event_name(kernel_type) : "");
  errno = saved;
}

}  // namespace rdmacm::core
