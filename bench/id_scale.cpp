// N ids on one event channel, step by step: create them all, resolve each
// one's address (to the device's own address), take and acknowledge the N
// ADDR_RESOLVED events, destroy them all. Prints one line of microseconds per
// id for each step and the resident memory per live id, for whichever
// librdmacm the process loaded (bench/id_scale.sh runs it under both, for
// several N, so that growth per id shows). With "create-only", no address is
// resolved (each resolved id holds an ephemeral port of its port space:
// 28,232 on Debian's defaults, so 100,000 resolved ids fail on either
// library): create and destroy only, resolve and events print as -.
//
//   id_scale N IPV4 [create-only]
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <sys/prctl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      long v = 0;
      f >> v;
      return v;
    }
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

double since(std::chrono::steady_clock::time_point t0, int n) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
}

// A step's microseconds per id, or "-" for a step not run.
std::string per_id(double us) {
  if (us < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", us);
  return b;
}

[[noreturn]] void fail(const char* what) {
  std::perror(what);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  bool resolving = argc == 3;
  if (argc != 3 && !(argc == 4 && !std::strcmp(argv[3], "create-only"))) {
    std::fprintf(stderr, "usage: %s N IPV4 [create-only]\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[1]);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(7999);
  if (n <= 0 || inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1) {
    std::fprintf(stderr, "bad N or address\n");
    return 2;
  }
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);  // RSS in 4 KiB pages, not 2 MiB jumps

  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) fail("rdma_create_event_channel");
  // Warm up: the first id opens the devices; not part of any step.
  rdma_cm_id* warm = nullptr;
  if (rdma_create_id(ch, &warm, nullptr, RDMA_PS_TCP) ||
      rdma_resolve_addr(warm, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000))
    fail("warm-up");
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev)) fail("warm-up event");
  rdma_ack_cm_event(ev);

  std::vector<rdma_cm_id*> ids(n);
  long rss0 = rss_kib();
  auto t = std::chrono::steady_clock::now();
  for (auto& id : ids)
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) fail("rdma_create_id");
  double create = since(t, n);

  double resolve = -1, events = -1;
  if (resolving) {
    t = std::chrono::steady_clock::now();
    for (auto* id : ids)
      if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000)) fail("rdma_resolve_addr");
    resolve = since(t, n);

    t = std::chrono::steady_clock::now();
    for (int got = 0; got < n; ++got) {
      if (rdma_get_cm_event(ch, &ev)) fail("rdma_get_cm_event");
      if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) {
        std::fprintf(stderr, "unexpected %s\n", rdma_event_str(ev->event));
        return 1;
      }
      rdma_ack_cm_event(ev);
    }
    events = since(t, n);
  }
  long rss1 = rss_kib();

  t = std::chrono::steady_clock::now();
  for (auto* id : ids)
    if (rdma_destroy_id(id)) fail("rdma_destroy_id");
  double destroy = since(t, n);

  rdma_destroy_id(warm);
  rdma_destroy_event_channel(ch);
  std::printf("%d %.1f %s %s %.1f %.0f\n", n, create, per_id(resolve).c_str(), per_id(events).c_str(), destroy,
              (rss1 - rss0) * 1024.0 / n);
  return 0;
}
