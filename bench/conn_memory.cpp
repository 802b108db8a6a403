// What a connection costs a socket program: a server and a client (two
// processes) open N TCP connections to each other, echo BYTES on each once,
// and keep them all open; at each count asked for, both report their
// resident memory (VmRSS) and their pinned memory (VmPin: what RDMA
// registration holds), and the client how fast that step connected and
// (--pings K) the median round trip of 64 bytes on one connection while all
// the others idle: what a wait costs the server's loop with that many idle
// connections in it. The server echoes in one poll() loop, or (--epoll) one
// epoll loop. Plain BSD socket calls only: run it bare for kernel TCP, or
// under a preload (ours, rdma-core's) for rsockets.
//
//   conn_memory --addr IP [--port P] [--at 1,256,4096] [--bytes 4096] [--secs S] [--epoll]
//               [--pings K] [--idle S] [--step-cmd CMD]
//
// Prints one line per count: "conns=N server_rss_kib=.. server_pin_kib=..
// client_rss_kib=.. client_pin_kib=.. secs=.. conns_per_s=.. [ping_us=..]",
// and "base ..." first (both processes before their first connection: the
// server listening). A step that does not finish within S seconds (default
// 120) prints "stuck at N" and ends the run with status 3: a hang is a figure
// too (rdma-core 44's preload stalls in raccept after poll said readable).
// --idle S: each count's memory is read after its connections have idled S
// seconds (a buffer grown by a large echo may go back meanwhile, as TCP's).
// --step-cmd runs CMD (sh -c, without LD_PRELOAD) after each count's line,
// all connections open: e.g. the kernel's share, `rdma res show`.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "socket_io.h"

namespace {

using bench::read_all;
using bench::write_all;

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// VmRSS and VmPin of this process, KiB.
void memory(long* rss, long* pin) {
  *rss = *pin = -1;
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "VmRSS:", 6)) *rss = atol(line + 6);
    if (!strncmp(line, "VmPin:", 6)) *pin = atol(line + 6);
  }
  fclose(f);
}

// The server: accepts and echoes everything on every connection, in one
// poll() loop or (--epoll) one epoll loop; on a line from the control pipe
// ("N") answers "rss pin" once N connections have each echoed BYTES.
class Server {
 public:
  Server(int lfd, int ctl_in, int ctl_out, size_t bytes) : lfd_(lfd), ctl_in_(ctl_in), ctl_out_(ctl_out),
                                                           bytes_(bytes), buf_(65536) {}
  [[noreturn]] void poll_loop() {
    for (;;) {
      std::vector<pollfd> fds{{lfd_, POLLIN, 0}, {ctl_in_, POLLIN, 0}};
      for (auto& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) _exit(10);
      if (fds[0].revents & POLLIN) accept_all(-1);
      if (fds[1].revents & (POLLIN | POLLHUP)) control();
      for (size_t i = 2; i < fds.size(); i++)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) echo(i - 2);
      report();
    }
  }
  [[noreturn]] void epoll_loop() {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event l{EPOLLIN, {.u64 = kListener}}, c{EPOLLIN, {.u64 = kControl}};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd_, &l) || epoll_ctl(ep, EPOLL_CTL_ADD, ctl_in_, &c)) _exit(12);
    epoll_event ev[64];
    for (;;) {
      int n = epoll_wait(ep, ev, 64, 1000);
      if (n < 0 && errno != EINTR) _exit(10);
      for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == kListener) accept_all(ep);
        else if (ev[i].data.u64 == kControl) control();
        else echo(ev[i].data.u64);
      }
      report();
    }
  }

 private:
  static constexpr uint64_t kListener = ~0ull, kControl = ~0ull - 1;
  struct Conn {
    int fd;
    size_t got = 0;
  };
  void accept_all(int ep) {
    for (;;) {
      int fd = accept(lfd_, nullptr, nullptr);
      if (fd < 0) return;
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      epoll_event e{EPOLLIN, {.u64 = conns_.size()}};
      if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e)) _exit(13);
      conns_.push_back({fd});
    }
  }
  void control() {
    char line[32] = {0};
    ssize_t n = read(ctl_in_, line, sizeof line - 1);
    if (n <= 0) _exit(0);  // the client is done
    want_ = strtoul(line, nullptr, 10);
    asked_ = true;
  }
  void echo(size_t i) {
    Conn& c = conns_[i];
    ssize_t n = read(c.fd, buf_.data(), buf_.size());
    if (n <= 0 || !write_all(c.fd, buf_.data(), static_cast<size_t>(n))) return;
    bool before = c.got >= bytes_;
    c.got += static_cast<size_t>(n);
    if (!before && c.got >= bytes_) done_++;
  }
  void report() {
    if (!asked_ || done_ < want_) return;
    long rss, pin;
    memory(&rss, &pin);
    char out[64];
    int n = snprintf(out, sizeof out, "%ld %ld\n", rss, pin);
    if (!write_all(ctl_out_, out, static_cast<size_t>(n))) _exit(11);
    asked_ = false;
  }
  int lfd_, ctl_in_, ctl_out_;
  size_t bytes_;
  std::vector<char> buf_;
  std::vector<Conn> conns_;
  size_t done_ = 0, want_ = 0;
  bool asked_ = false;
};

// --pings K: K round trips of 64 bytes on one connection while all the
// others idle; the median, in microseconds.
double ping_us(int fd, int pings) {
  std::vector<double> t;
  char b[64] = {'p'}, r[64];
  for (int i = 0; i < pings; i++) {
    double t0 = now();
    if (!write_all(fd, b, sizeof b) || !read_all(fd, r, sizeof r)) return -1;
    t.push_back((now() - t0) * 1e6);
  }
  std::sort(t.begin(), t.end());
  return t.empty() ? 0 : t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const char* addr = nullptr;
  int port = 7470;
  size_t bytes = 4096;
  double secs = 120, idle = 0;
  std::string at = "1,256,4096";
  const char* step_cmd = nullptr;
  bool use_epoll = false;
  int pings = 0;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--epoll") {
      use_epoll = true;
      i--;
      continue;
    }
    if (i + 1 == argc) {
      addr = nullptr;
      break;
    }
    if (a == "--addr") addr = argv[i + 1];
    else if (a == "--port") port = atoi(argv[i + 1]);
    else if (a == "--at") at = argv[i + 1];
    else if (a == "--bytes") bytes = strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--secs") secs = atof(argv[i + 1]);
    else if (a == "--step-cmd") step_cmd = argv[i + 1];
    else if (a == "--pings") pings = atoi(argv[i + 1]);
    else if (a == "--idle") idle = atof(argv[i + 1]);
    else addr = nullptr, i = argc;
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  if (!addr || inet_pton(AF_INET, addr, &sin.sin_addr) != 1 || !bytes) {
    fprintf(stderr, "usage: conn_memory --addr IPv4 [--port P] [--at 1,256,4096] [--bytes N] [--secs S] [--epoll]"
                    " [--pings K] [--idle S]\n");
    return 2;
  }
  std::vector<size_t> counts;
  for (const char* p = at.c_str(); *p;) {
    counts.push_back(strtoul(p, const_cast<char**>(&p), 10));
    if (*p == ',') p++;
    else if (*p) return 2;
  }
  // Each connection is a descriptor or more on each side.
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max = 4 * counts.back() + 256;
  if (setrlimit(RLIMIT_NOFILE, &rl)) perror("setrlimit RLIMIT_NOFILE (continuing)");
  signal(SIGPIPE, SIG_IGN);

  int to_srv[2], from_srv[2];
  if (pipe(to_srv) || pipe(from_srv)) return 1;
  // The server is a process of its own from the start: no socket crosses a
  // fork (a preload's state need not survive one).
  pid_t pid = fork();
  if (pid == 0) {
    close(to_srv[1]);
    close(from_srv[0]);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) ||
        listen(lfd, static_cast<int>(counts.back()) + 16)) {
      perror("server socket");
      _exit(1);
    }
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    long rss, pin;
    memory(&rss, &pin);  // the server's base: listening
    char out[64];
    int n = snprintf(out, sizeof out, "%ld %ld\n", rss, pin);
    if (!write_all(from_srv[1], out, static_cast<size_t>(n))) _exit(11);
    Server server(lfd, to_srv[0], from_srv[1], bytes);
    if (use_epoll) server.epoll_loop();
    server.poll_loop();
  }
  close(to_srv[0]);
  close(from_srv[1]);
  long srss = -1, spin = -1, crss, cpin;
  char base[64] = {0};
  pollfd bp{from_srv[0], POLLIN, 0};
  if (poll(&bp, 1, static_cast<int>(secs * 1000)) != 1 || read(from_srv[0], base, sizeof base - 1) <= 0 ||
      sscanf(base, "%ld %ld", &srss, &spin) != 2) {
    printf("stuck at 0 (the server did not listen)\n");
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return 3;
  }
  memory(&crss, &cpin);
  printf("base server_rss_kib=%ld server_pin_kib=%ld client_rss_kib=%ld client_pin_kib=%ld\n", srss, spin, crss,
         cpin);
  fflush(stdout);

  std::vector<int> fds;
  std::vector<char> out(bytes, 'm'), in(bytes);
  int rc = 0;
  double t0 = now();
  for (size_t want : counts) {
    double end = now() + secs, step0 = now();
    size_t had = fds.size();
    while (fds.size() < want) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin)) {
        fprintf(stderr, "connection %zu: %s\n", fds.size() + 1, strerror(errno));
        rc = 1;
        break;
      }
      // A bounded echo: the server must answer before the step's end.
      timeval tv{static_cast<time_t>(secs), 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      if (!write_all(fd, out.data(), bytes) || !read_all(fd, in.data(), bytes) || in != out || now() > end) {
        printf("stuck at %zu (%s)\n", fds.size() + 1, now() > end ? "the step's time" : strerror(errno));
        rc = 3;
        break;
      }
      fds.push_back(fd);
    }
    if (rc) break;
    double step_s = now() - step0;
    if (idle > 0) usleep(static_cast<useconds_t>(idle * 1e6));  // the time measured: idling
    char line[32], answer[64] = {0};
    int n = snprintf(line, sizeof line, "%zu\n", want);
    pollfd pf{from_srv[0], POLLIN, 0};
    if (!write_all(to_srv[1], line, static_cast<size_t>(n)) || poll(&pf, 1, static_cast<int>(secs * 1000)) != 1 ||
        read(from_srv[0], answer, sizeof answer - 1) <= 0) {
      printf("stuck at %zu (the server did not report)\n", want);
      rc = 3;
      break;
    }
    sscanf(answer, "%ld %ld", &srss, &spin);
    memory(&crss, &cpin);
    double conn_s = (want - had) / step_s;
    printf("conns=%zu server_rss_kib=%ld server_pin_kib=%ld client_rss_kib=%ld client_pin_kib=%ld secs=%.1f"
           " conns_per_s=%.0f", want, srss, spin, crss, cpin, now() - t0, conn_s);
    if (pings) printf(" ping_us=%.1f", ping_us(fds.back(), pings));
    printf("\n");
    fflush(stdout);
    if (step_cmd) {
      unsetenv("LD_PRELOAD");  // loaded already: only the command goes without it
      if (system(step_cmd) != 0) fprintf(stderr, "--step-cmd failed\n");
      fflush(stdout);
    }
  }
  close(to_srv[1]);
  for (int fd : fds) close(fd);
  if (rc) kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  return rc;
}
