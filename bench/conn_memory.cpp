// What a connection costs a socket program in memory: a poll() server and a
// client (two processes) open N TCP connections to each other, echo BYTES on
// each once, and keep them all open; at each count asked for, both report
// their resident memory (VmRSS) and their pinned memory (VmPin: what RDMA
// registration holds). Plain BSD socket calls only: run it bare for kernel
// TCP, or under a preload (ours, rdma-core's) for rsockets.
//
//   conn_memory --addr IP [--port P] [--at 1,256,4096] [--bytes 4096] [--secs S] [--step-cmd CMD]
//
// Prints one line per count: "conns=N server_rss_kib=.. server_pin_kib=..
// client_rss_kib=.. client_pin_kib=.. secs=..", and "base ..." first (both
// processes before their first connection: the server listening). A step
// that does not finish within S seconds (default 120) prints "stuck at N"
// and ends the run with status 3: a hang is a figure too (rdma-core 44's
// preload stalls in raccept after poll said readable). --step-cmd runs CMD
// (sh -c, without LD_PRELOAD) after each count's line, all connections open:
// e.g. the kernel's share, `rdma res show`.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

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

bool write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all(int fd, char* p, size_t n) {
  while (n) {
    ssize_t k = read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

struct Conn {
  int fd;
  size_t got = 0, sent = 0;
};

// The server: accepts and echoes BYTES on each connection, all in one poll()
// loop; on a line from the control pipe ("N") answers "rss pin" once N
// connections have been echoed in full.
[[noreturn]] void serve(int lfd, int ctl_in, int ctl_out, size_t bytes) {
  std::vector<Conn> conns;
  std::vector<char> buf(bytes);
  size_t done = 0, want = 0;
  bool asked = false;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({lfd, POLLIN, 0});
    fds.push_back({ctl_in, POLLIN, 0});
    for (auto& c : conns)
      fds.push_back({c.fd, static_cast<short>(c.got < bytes ? POLLIN : (c.sent < bytes ? POLLOUT : 0)), 0});
    if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) _exit(10);
    if (fds[0].revents & POLLIN) {
      for (;;) {
        int fd = accept(lfd, nullptr, nullptr);
        if (fd < 0) break;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        conns.push_back({fd});
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      char line[32] = {0};
      ssize_t n = read(ctl_in, line, sizeof line - 1);
      if (n <= 0) _exit(0);  // the client is done
      want = strtoul(line, nullptr, 10);
      asked = true;
    }
    for (size_t i = 0; i < conns.size(); i++) {
      Conn& c = conns[i];
      short re = fds[i + 2].revents;
      if ((re & POLLIN) && c.got < bytes) {
        ssize_t n = read(c.fd, buf.data() + c.got, bytes - c.got);
        if (n > 0) c.got += static_cast<size_t>(n);
      }
      if ((re & POLLOUT) && c.got == bytes && c.sent < bytes) {
        ssize_t n = write(c.fd, buf.data() + c.sent, bytes - c.sent);
        if (n > 0 && (c.sent += static_cast<size_t>(n)) == bytes) done++;
      }
    }
    if (asked && done >= want) {
      long rss, pin;
      memory(&rss, &pin);
      char out[64];
      int n = snprintf(out, sizeof out, "%ld %ld\n", rss, pin);
      if (!write_all(ctl_out, out, static_cast<size_t>(n))) _exit(11);
      asked = false;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* addr = nullptr;
  int port = 7470;
  size_t bytes = 4096;
  double secs = 120;
  std::string at = "1,256,4096";
  const char* step_cmd = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--addr") addr = argv[i + 1];
    else if (a == "--port") port = atoi(argv[i + 1]);
    else if (a == "--at") at = argv[i + 1];
    else if (a == "--bytes") bytes = strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--secs") secs = atof(argv[i + 1]);
    else if (a == "--step-cmd") step_cmd = argv[i + 1];
    else addr = nullptr, i = argc;
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  if (!addr || inet_pton(AF_INET, addr, &sin.sin_addr) != 1 || !bytes) {
    fprintf(stderr, "usage: conn_memory --addr IPv4 [--port P] [--at 1,256,4096] [--bytes N] [--secs S]\n");
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
    serve(lfd, to_srv[0], from_srv[1], bytes);
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
    double end = now() + secs;
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
    printf("conns=%zu server_rss_kib=%ld server_pin_kib=%ld client_rss_kib=%ld client_pin_kib=%ld secs=%.1f\n", want,
           srss, spin, crss, cpin, now() - t0);
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
