// sockconf's frame and main: runs each case in a process of its own (this
// program again, exec'd, so a preload starts clean in every case) under a
// hard bound, and prints one line a case: "name<TAB>observation[<TAB>rxe=N]".
// The parent's own waiting and reading are raw system calls, so no preload
// can hang the harness itself.
#include "frame.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

std::vector<Case> &all_cases() {
  static std::vector<Case> v;
  return v;
}

sockaddr_storage ADDR, LADDR;
socklen_t ALEN, LLEN;
int FAM;
std::atomic<double> peer_at{0};
const char *SELF;
static int OUT = 1;
static sockaddr_storage ADDR4, ADDR6;
static bool have6;

double mono() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put(const char *s, size_t n) {
  while (n) {
    long w = syscall(SYS_write, OUT, s, n);
    if (w <= 0) return;
    s += w;
    n -= w;
  }
}

void obs(const char *fmt, ...) {
  char buf[512];
  buf[0] = ' ';
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + 1, sizeof buf - 1, fmt, ap);
  va_end(ap);
  put(buf, 1 + (n < (int)sizeof buf - 1 ? n : sizeof buf - 2));
}

void pend(const char *label) {
  std::string s = std::string(" ") + label + "=";
  put(s.data(), s.size());
}

void done(long r, int err, double t0, bool timed) {
  char buf[96];
  int n = r < 0 ? snprintf(buf, sizeof buf, "-1:%s", err ? strerrorname_np(err) : "0")
                : snprintf(buf, sizeof buf, "%ld", r);
  if (timed) {
    double t = mono();
    double pa = peer_at.load();
    const char *cls = pa > t0 && t >= pa ? "after-peer" : t - t0 < 1.5 ? "now" : "slow";
    n += snprintf(buf + n, sizeof buf - n, "@%s", cls);
  }
  put(buf, n);
}

void later(int ms, std::function<void()> fn) {
  std::thread([ms, fn] {
    usleep(ms * 1000);
    peer_at.store(mono());
    fn();
  }).detach();
}

[[noreturn]] void setup_failed(const char *what) {
  int e = errno;
  char buf[128];
  int n = snprintf(buf, sizeof buf, " setup:%s=-1:%s", what, e ? strerrorname_np(e) : "0");
  put(buf, n);
  _exit(0);
}

int port_of(const sockaddr_storage &a) {
  return ntohs(a.ss_family == AF_INET6 ? ((const sockaddr_in6 &)a).sin6_port : ((const sockaddr_in &)a).sin_port);
}

sockaddr_storage with_port(const sockaddr_storage &a, int port) {
  sockaddr_storage b = a;
  if (b.ss_family == AF_INET6)
    ((sockaddr_in6 &)b).sin6_port = htons(port);
  else
    ((sockaddr_in &)b).sin_port = htons(port);
  return b;
}

static int bound(int type) {
  int fd = socket(FAM, type, 0);
  if (fd < 0) setup_failed("socket");
  if (bind(fd, (sockaddr *)&ADDR, ALEN)) setup_failed("bind");
  LLEN = sizeof LADDR;
  if (getsockname(fd, (sockaddr *)&LADDR, &LLEN)) setup_failed("getsockname");
  return fd;
}

int listener(int backlog) {
  int fd = bound(SOCK_STREAM);
  if (listen(fd, backlog)) setup_failed("listen");
  return fd;
}

int udp_bound() { return bound(SOCK_DGRAM); }

int dial(const sockaddr_storage &a, socklen_t len) {
  int fd = socket(a.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const sockaddr *)&a, len)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

void pair(int &c, int &s) {
  int l = listener();
  int acc = -1, aerr = 0;
  std::thread t([&] {
    acc = accept(l, nullptr, nullptr);
    aerr = errno;
  });
  c = dial(LADDR, LLEN);
  if (c < 0) setup_failed("connect");
  t.join();
  if (acc < 0) {
    errno = aerr;
    setup_failed("accept");
  }
  s = acc;
  close(l);
}

long readn(int fd, void *buf, long n) {
  long got = 0;
  while (got < n) {
    long r = recv(fd, (char *)buf + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return got ? got : r;
    got += r;
  }
  return got;
}

long writen(int fd, const void *buf, long n) {
  long put_ = 0;
  while (put_ < n) {
    long w = send(fd, (const char *)buf + put_, n - put_, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return put_ ? put_ : w;
    put_ += w;
  }
  return put_;
}

static const char *bits(unsigned v, const std::vector<std::pair<unsigned, const char *>> &names) {
  static char buf[128];
  buf[0] = 0;
  for (auto &[b, name] : names)
    if (v & b) {
      if (buf[0]) strcat(buf, "|");
      strcat(buf, name);
      v &= ~b;
    }
  if (v) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s0x%x", buf[0] ? "|" : "", v);
  return buf[0] ? buf : "0";
}

const char *pollbits(int revents) {
  return bits(revents & ~(POLLRDNORM | POLLWRNORM | POLLRDBAND | POLLWRBAND),
              {{POLLIN, "IN"}, {POLLPRI, "PRI"}, {POLLOUT, "OUT"}, {POLLERR, "ERR"}, {POLLHUP, "HUP"},
               {POLLNVAL, "NVAL"}, {POLLRDHUP, "RDHUP"}});
}

const char *epollbits(unsigned ev) {
  return pollbits((int)ev);  // EPOLLIN == POLLIN etc.
}

void fill(void *buf, long n, unsigned seed) {
  unsigned x = seed * 2654435761u + 1;
  for (long i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    ((unsigned char *)buf)[i] = (unsigned char)(x >> 16);
  }
}

bool same(const void *buf, long n, unsigned seed) {
  std::vector<unsigned char> want(n);
  fill(want.data(), n, seed);
  return memcmp(buf, want.data(), n) == 0;
}

// --- main ------------------------------------------------------------------------------

static bool parse(const char *ip, sockaddr_storage &a) {
  memset(&a, 0, sizeof a);
  auto &a4 = (sockaddr_in &)a;
  auto &a6 = (sockaddr_in6 &)a;
  if (inet_pton(AF_INET, ip, &a4.sin_addr) == 1) {
    a4.sin_family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, ip, &a6.sin6_addr) == 1) {
    a6.sin6_family = AF_INET6;
    return true;
  }
  return false;
}

static void use(const Case &c) {
  ADDR = (c.flags & V6) ? ADDR6 : ADDR4;
  FAM = ADDR.ss_family;
  ALEN = FAM == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

static long counter(const char *path) {
  if (!path) return 0;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[64] = {0};
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  return n > 0 ? atol(buf) : -1;
}

// The case itself, in the process that runs it (its observation goes to OUT).
[[noreturn]] static void run_here(const Case &c) {
  if ((c.flags & V6) && !have6) {
    obs("skipped:no-ipv6-address");
    _exit(0);
  }
  use(c);
  signal(SIGPIPE, SIG_IGN);
  c.fn();
  _exit(0);  // no destructors, no waiting for the peers' threads
}

// Runs case C in a new process bounded by BOUND seconds; its observation,
// with "never" where it was stopped. Under a preload the process is this
// program exec'd again, so that the preload starts clean; without one (the
// kernel's column) a fork is the same clean start at a tenth of the cost
// (an exec costs ~150 ms of CPU in the VM under TCG): the same descriptors
// (the pipe's two ends closed as exec's O_CLOEXEC would), the same state.
static std::string run_one(const Case &c, const char *addr, const char *addr6, int bound) {
  int p[2];
  if (syscall(SYS_pipe2, p, O_CLOEXEC | O_NONBLOCK)) return " harness:pipe2 failed";
  static const bool preloaded = getenv("LD_PRELOAD") && *getenv("LD_PRELOAD");
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int out = dup(p[1]);  // without CLOEXEC: the case's channel
    if (!preloaded) {
      close(p[0]);
      close(p[1]);
      OUT = out;
      run_here(c);
    }
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", out);
    execl(SELF, SELF, "--addr", addr, "--addr6", addr6 ? addr6 : "", "--one", c.name, "--out", fdarg, (char *)0);
    _exit(127);
  }
  syscall(SYS_close, p[1]);
  std::string text;
  double end = mono() + bound;
  int st = 0;
  bool exited = false, hung = false;
  for (;;) {
    char buf[512];
    long n;
    while ((n = syscall(SYS_read, p[0], buf, sizeof buf)) > 0) text.append(buf, n);
    if (waitpid(pid, &st, WNOHANG) == pid) {
      exited = true;
      break;
    }
    if (mono() >= end) {
      hung = true;
      break;
    }
    pollfd pf = {p[0], POLLIN, 0};
    timespec ts = {0, 20 * 1000 * 1000};
    if (syscall(SYS_ppoll, &pf, 1, &ts, nullptr, 0) > 0 && (pf.revents & POLLHUP)) {
      // the case's channel is closed: only the exit is left to wait for
      timespec t2 = {0, 5 * 1000 * 1000};
      nanosleep(&t2, nullptr);
    }
  }
  kill(-pid, SIGKILL);  // the case's peers too
  if (!exited) waitpid(pid, &st, 0);
  int fl = (int)syscall(SYS_fcntl, p[0], F_GETFL);
  syscall(SYS_fcntl, p[0], F_SETFL, fl | O_NONBLOCK);
  char buf[512];
  long n;
  while ((n = syscall(SYS_read, p[0], buf, sizeof buf)) > 0) text.append(buf, n);
  syscall(SYS_close, p[0]);
  if (hung)
    text += (!text.empty() && text.back() == '=') ? "never" : " never";
  else if (WIFSIGNALED(st))
    text += std::string(" killed:") + (sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
  else if (WEXITSTATUS(st))
    text += " exit:" + std::to_string(WEXITSTATUS(st));
  return text.empty() ? "-" : text.substr(1);
}

void exec_child(int argc, char **argv);  // cases_proc.cpp: the side of the exec cases that was exec'd

static int usage() {
  fprintf(stderr,
          "usage: sockconf --addr IPv4 [--addr6 IPv6] [--bound S] [--long-bound S] [--counter FILE] [--only REGEX]\n"
          "       sockconf --list\n"
          "Runs each case in a process of its own and prints 'case<TAB>observation' (and <TAB>rxe=N with\n"
          "--counter: how far the counter in FILE rose during the case).\n");
  return 2;
}

int main(int argc, char **argv) {
  static char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  SELF = n > 0 ? (self[n] = 0, self) : argv[0];
  if (argc > 1 && !strcmp(argv[1], "--exec-child")) {
    exec_child(argc, argv);
    return 0;
  }
  const char *addr = nullptr, *addr6 = nullptr, *one = nullptr, *only = nullptr, *ctr = nullptr;
  int bound = 4, long_bound = 12;
  bool list = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--list") {
      list = true;
      continue;
    }
    if (!v) return usage();
    i++;
    if (a == "--addr") addr = v;
    else if (a == "--addr6") addr6 = *v ? v : nullptr;
    else if (a == "--one") one = v;
    else if (a == "--out") OUT = atoi(v);
    else if (a == "--bound") bound = atoi(v);
    else if (a == "--long-bound") long_bound = atoi(v);
    else if (a == "--counter") ctr = v;
    else if (a == "--only") only = v;
    else return usage();
  }
  if (list) {
    for (auto &c : all_cases())
      printf("%s\t%s\t%s%s%s\t%s\n", c.name, c.cls, c.flags & DATA ? "data," : "", c.flags & LOOP ? "loop," : "",
             c.flags & V6 ? "v6," : "", c.expect);
    return 0;
  }
  if (!addr || !parse(addr, ADDR4) || ADDR4.ss_family != AF_INET) return usage();
  have6 = addr6 && parse(addr6, ADDR6) && ADDR6.ss_family == AF_INET6;
  if (one) {
    for (auto &c : all_cases())
      if (!strcmp(c.name, one)) run_here(c);
    return usage();
  }
  regex_t re;
  if (only && regcomp(&re, only, REG_EXTENDED | REG_NOSUB)) return usage();
  setvbuf(stdout, nullptr, _IOLBF, 0);
  for (auto &c : all_cases()) {
    if (only && regexec(&re, c.name, 0, nullptr, 0)) continue;
    long before = counter(ctr);
    std::string o = run_one(c, addr, addr6, (c.flags & LONG) ? long_bound : bound);
    long after = counter(ctr);
    if (ctr)
      printf("%s\t%s\trxe=%ld\n", c.name, o.c_str(), before < 0 || after < 0 ? -1 : after - before);
    else
      printf("%s\t%s\n", c.name, o.c_str());
  }
  return 0;
}
