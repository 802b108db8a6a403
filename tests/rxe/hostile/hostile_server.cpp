// hostile_server: an rsocket stream server (the program under test: our
// librdmacm, or rdma-core's with RDMACM_REFERENCE=1 and LD_PRELOAD) facing
// hostile_peer (rdma-core's librdmacm and libibverbs, misbehaving) while it
// serves a well-behaved rsocket client (a thread of this program, on the same
// library) by echo. One run does every case (README.md):
//   1a-1f  protocol violations on an established stream
//   2      a half-open accept (the REQ, then never the RTU)
//   3      the backlog of rlisten
// On our library each case asserts issue 25's contract; on rdma-core's the
// observed behaviour is printed, and asserted where it is deterministic
// (kReference below), so the test documents it.
//
//   hostile_server --peer PATH [--only CASE]   (CASE: a name, or its start: 1, 2, 3)
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../rxe_env.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using rdmacm::rxe::device_addr;
using rdmacm::rxe::device_ip;
using rdmacm::rxe::reference;
using rdmacm::rxe::sent_packets;

const char* peer_path = nullptr;
// Where the current case is, for the watchdog: a library that hangs (rdma-core
// 44's does, in a case) is reported with its step rather than killed blind.
std::atomic<const char*> step{"start"};
std::atomic<const char*> call{""};  // the r* call under way, within the step
std::atomic<const char*> case_name{""};
std::atomic<long> case_deadline{0};  // steady_clock seconds; 0: none
bool ref = false;
int failures = 0;
std::string lib_name() { return ref ? "rdma-core 44" : "ours"; }

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

// One case's findings: each check either holds or is a failure (on ours), and
// `seen` is the one-line description printed for both libraries.
struct Verdict {
  std::string name, seen;
  Verdict(std::string n, int secs) : name(std::move(n)) {
    case_name = name.c_str();
    step = "start";
    case_deadline = std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count() + secs;
  }
  std::vector<std::string> failed;
  std::string behaviour;  // the server's answer to the peer, compared on rdma-core's
  void check(bool ok, const std::string& what) {
    if (!ok) failed.push_back(what);
  }
  void note(const std::string& s) {
    seen += (seen.empty() ? "" : "; ") + s;
    std::printf("  %s [%s]: %s\n", name.c_str(), lib_name().c_str(), s.c_str());
  }
  void report();
  void report_now() {
    case_deadline = 0;
    std::printf("CASE %s [%s]: %s\n", name.c_str(), lib_name().c_str(), seen.c_str());
    for (auto& f : failed) std::printf("  FAIL %s [%s]: %s\n", name.c_str(), lib_name().c_str(), f.c_str());
    std::printf("%s %s [%s]\n", failed.empty() ? "PASS" : "FAIL", name.c_str(), lib_name().c_str());
    std::fflush(stdout);
    if (!failed.empty()) ++failures;
  }
};

std::string revents_str(int r) {
  std::string s;
  if (r & POLLIN) s += "IN|";
  if (r & POLLOUT) s += "OUT|";
  if (r & POLLERR) s += "ERR|";
  if (r & POLLHUP) s += "HUP|";
  if (r & POLLNVAL) s += "NVAL|";
  if (s.empty()) return "0";
  s.pop_back();
  return s;
}

const char* errname(int e) {
  switch (e) {
    case EPROTO: return "EPROTO";
    case ECONNRESET: return "ECONNRESET";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EIO: return "EIO";
    case EAGAIN: return "EAGAIN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENOTCONN: return "ENOTCONN";
    case EPIPE: return "EPIPE";
    case ECONNABORTED: return "ECONNABORTED";
    case EINVAL: return "EINVAL";
    case 0: return "0";
    default: return strerror(e);
  }
}

// rpoll on one socket for up to `ms`: its revents, 0 on timeout. Never
// rpoll's own timeout: rdma-core 44's rpoll with a timeout may spin for ever
// (fixed upstream after 44); this polls with 0 every 2 ms instead.
int rpoll1(int fd, short events, int ms) {
  auto until = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    pollfd p{fd, events, 0};
    int n = rpoll(&p, 1, 0);
    if (n != 0) return n > 0 ? p.revents : n;
    if (Clock::now() >= until) return 0;
    usleep(2000);
  }
}

// The peer names the librdmacm it runs on: it must be rdma-core's (the system's).
bool system_lib(const std::string& line) {
  auto at = line.find("lib=");
  if (at == std::string::npos) return false;
  char a[PATH_MAX], b[PATH_MAX];
  return realpath(line.substr(at + 4).c_str(), a) &&
         realpath("/usr/lib/x86_64-linux-gnu/librdmacm.so.1", b) && !std::strcmp(a, b);
}

sockaddr* sa(sockaddr_in* a) { return reinterpret_cast<sockaddr*>(a); }

int listener(uint16_t port, int backlog) {
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = device_addr(port);
  if (l < 0 || rbind(l, sa(&a), sizeof(a)) || rlisten(l, backlog)) {
    std::printf("FATAL listener on %u: %s\n", port, strerror(errno));
    std::exit(1);
  }
  return l;
}

// raccept within `ms` (rpoll on the listener first); -1 on timeout.
int accept_within(int l, int ms, uint16_t* peer_port = nullptr) {
  call = "rpoll on the listener";
  if (rpoll1(l, POLLIN, ms) <= 0) return -1;
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  call = "raccept";
  int fd = raccept(l, sa(&a), &len);
  call = "";
  if (fd >= 0 && peer_port) *peer_port = ntohs(a.sin_port);
  return fd;
}

// A non-blocking rconnect finished within `ms`: 0, or the error (ETIMEDOUT
// if nothing answered by then). The socket is left blocking again.
int connect_within(int s, uint16_t port, int ms) {
  int flags = rfcntl(s, F_GETFL);
  rfcntl(s, F_SETFL, flags | O_NONBLOCK);
  sockaddr_in a = device_addr(port);
  int err = 0;
  call = "rconnect";
  if (rconnect(s, sa(&a), sizeof(a))) {
    err = errno;
    if (err == EINPROGRESS) {
      call = "rpoll for POLLOUT";
      int r = rpoll1(s, POLLOUT, ms);
      if (r <= 0) {
        err = ETIMEDOUT;
      } else {
        call = "rgetsockopt SO_ERROR";
        socklen_t len = sizeof(err);
        if (rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len)) err = errno;
      }
    }
  }
  call = "rfcntl F_SETFL";
  rfcntl(s, F_SETFL, flags);
  call = "";
  return err;
}

// --- the peer process -------------------------------------------------------
struct Peer {
  pid_t pid = -1;
  int to = -1, from = -1;
  std::string pending;

  bool start(const std::string& mode, uint16_t port) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    // rdma-core's library for the peer, whatever the server runs on.
    std::vector<char*> env;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "LD_PRELOAD=", 11) && std::strncmp(*e, "LD_LIBRARY_PATH=", 16)) env.push_back(*e);
    env.push_back(nullptr);
    std::string ip = device_ip(), p = std::to_string(port);
    char* argv[] = {const_cast<char*>(peer_path), const_cast<char*>(mode.c_str()),
                    const_cast<char*>(ip.c_str()), const_cast<char*>(p.c_str()), nullptr};
    int rc = posix_spawn(&pid, peer_path, &fa, nullptr, argv, env.data());
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to = in[1];
    from = out[0];
    return rc == 0;
  }
  // The next line from the peer within `ms` ("" on timeout or EOF).
  std::string hear(int ms) {
    auto until = Clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      auto nl = pending.find('\n');
      if (nl != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        return line;
      }
      int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
      pollfd p{from, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, left) <= 0) return "";
      char buf[512];
      ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) return "";
      pending.append(buf, static_cast<size_t>(n));
    }
  }
  void tell(const char* line) {
    std::string s = std::string(line) + "\n";
    if (write(to, s.data(), s.size()) < 0) {
    }
  }
  // Tells it to leave; waits up to 5 s, then kills it. Its exit status.
  int finish() {
    if (pid < 0) return -1;
    tell("exit");
    close(to);
    int st = 0;
    for (int i = 0; i < 500; ++i) {
      if (waitpid(pid, &st, WNOHANG) == pid) break;
      if (i == 499) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
      }
      usleep(10000);
    }
    close(from);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ~Peer() { finish(); }
};

// --- the well-behaved client and its echo server ------------------------------
// The client sends 16 KiB rounds and checks each echoed back, until stopped;
// the server's side echoes on the accepted socket until EOF.
struct GoodClient {
  static constexpr size_t kRound = 16384;
  std::atomic<int> rounds{0};
  std::atomic<bool> stop{false};
  std::string error;  // empty: every round came back intact
  int client = -1, served = -1;
  std::thread cthread, ethread;
  long pkts0 = 0;
  double connect_secs = 0;
  int wait_ms = 10000;  // for the connection and the accept

  // Connects to `l` and accepts it there; false (with error) if either failed.
  bool start(int l, uint16_t port) {
    step = "good client: rconnect and raccept";
    pkts0 = sent_packets();
    client = rsocket(AF_INET, SOCK_STREAM, 0);
    auto t0 = Clock::now();
    std::atomic<int> cerr{-1};
    std::thread c([&] { cerr = connect_within(client, port, wait_ms); });
    uint16_t pp = 0;
    // The good one is the connection from the client's port (a half-open one
    // may come out of raccept first, on a library that lets it).
    for (int tries = 0; tries < 3 && served < 0; ++tries) {
      int fd = accept_within(l, wait_ms, &pp);
      if (fd < 0) break;
      sockaddr_in me{};
      c.join();
      socklen_t len = sizeof(me);
      rgetsockname(client, sa(&me), &len);
      if (pp == ntohs(me.sin_port)) {
        served = fd;
      } else {
        error += fmt("raccept returned another connection first (port %u); ", pp);
        others.push_back(fd);
        c = std::thread([] {});
      }
    }
    if (c.joinable()) c.join();
    connect_secs = since(t0);
    if (cerr != 0 || served < 0) {
      error += fmt("connect %s, accept %s", errname(cerr), served < 0 ? "none" : "ok");
      return false;
    }
    ethread = std::thread([this] { echo(); });
    cthread = std::thread([this] { run(); });
    return true;
  }
  std::vector<int> others;

  void echo() {
    std::vector<char> buf(kRound);
    for (;;) {
      ssize_t n = rrecv(served, buf.data(), buf.size(), 0);
      if (n <= 0) return;
      for (ssize_t off = 0; off < n;) {
        ssize_t m = rsend(served, buf.data() + off, static_cast<size_t>(n - off), 0);
        if (m <= 0) return;
        off += m;
      }
    }
  }
  void run() {
    std::vector<char> out(kRound), in(kRound);
    for (int r = 0; !stop || r < 2; ++r) {
      for (size_t i = 0; i < kRound; ++i) out[i] = static_cast<char>(r * 131 + i);
      size_t done = 0;
      while (done < kRound) {
        ssize_t m = rsend(client, out.data() + done, kRound - done, 0);
        if (m <= 0) { error += fmt("rsend %s", errname(errno)); return; }
        done += static_cast<size_t>(m);
      }
      for (done = 0; done < kRound;) {
        ssize_t m = rrecv(client, in.data() + done, kRound - done, 0);
        if (m <= 0) { error += fmt("rrecv %zd %s", m, errname(errno)); return; }
        done += static_cast<size_t>(m);
      }
      if (in != out) { error += fmt("round %d came back different", r); return; }
      ++rounds;
    }
  }
  // Waits for `n` more rounds (up to `ms`); false if they did not come.
  bool more_rounds(int n, int ms) {
    int want = rounds + n;
    auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (rounds < want && Clock::now() < until && error.empty()) usleep(2000);
    return rounds >= want;
  }
  // Stops, closes both ends, checks every round and rxe0's counter.
  void finish(Verdict& v, const char* when) {
    step = "good client: its last round";
    stop = true;
    if (cthread.joinable()) cthread.join();
    step = "good client: rshutdown";
    if (client >= 0) rshutdown(client, SHUT_RDWR);
    step = "good client: the echo's end";
    if (ethread.joinable()) ethread.join();
    step = "good client: rclose";
    if (client >= 0) rclose(client);
    if (served >= 0) rclose(served);
    for (int fd : others) rclose(fd);
    client = served = -1;
    long pkts = sent_packets() - pkts0;
    long want = 2L * rounds * static_cast<long>(kRound) / 1024;
    v.check(error.empty(), fmt("good client (%s): %s", when, error.c_str()));
    v.check(rounds >= 2, fmt("good client (%s): %d rounds", when, rounds.load()));
    v.check(pkts >= want, fmt("good client (%s): rxe0 sent_pkts +%ld < %ld", when, pkts, want));
    v.note(fmt("good client %s: %d rounds, rxe0 +%ld pkts", when, rounds.load(), pkts));
  }
};

// A short exchange with a fresh good client: the listener still serves.
void good_after(int l, uint16_t port, Verdict& v) {
  GoodClient g;
  if (!g.start(l, port)) {
    v.check(false, "good client after: " + g.error);
    g.finish(v, "after");
    return;
  }
  g.more_rounds(2, 10000);
  g.finish(v, "after");
}

// rdma-core 44's answers as observed on the Soft-RoCE VM (Verdict::behaviour),
// asserted on its run so that this file documents them; nullptr: printed only
// (nondeterministic).
struct Observed {
  const char* name;
  const char* behaviour;
};
constexpr Observed kObserved[] = {
    // The 385th message wraps its rq_size + 1 message ring: head == tail, and
    // everything queued (the hello too) is never read.
    {"1a-credits", "rrecv 0 bytes (0 h, 0 a, 0 X) then nothing more within 3 s; rsend 1; rpoll OUT"},
    // The length claimed is read out of its buffer: 131,009 bytes, one of them
    // sent (`X`), the rest whatever the buffer held.
    {"1b-window", "rrecv 131073 bytes (64 h, 0 a, 1 X) then nothing more within 3 s; rsend 1; rpoll OUT"},
    // A DATA of 0 bytes: nothing (with rpoll's own timeout instead of polling
    // with 0, one run read it as the end of the stream: EOF, POLLHUP).
    {"1c-zero-length", "rrecv 64 bytes (64 h, 0 a, 0 X) then nothing more within 3 s; rsend 1; rpoll OUT"},
    // Without immediate data it reads the op from 4 bytes past its receive
    // buffer (zero so far: as 1c): an over-read, not asserted.
    {"1d-no-imm", nullptr},
    // A reserved op is taken as DATA.
    {"1e-unknown-op", "rrecv 65 bytes (64 h, 0 a, 1 X) then nothing more within 3 s; rsend 1; rpoll OUT"},
    // The failed receive is skipped; the QP is in error, rsend still says 1.
    {"1f-failed-recv", "rrecv 64 bytes (64 h, 0 a, 0 X) then nothing more within 3 s; rsend 1; rpoll IN|OUT|ERR"},
    // Its listener's service thread waits in rdma_accept for the half-open
    // peer: no one else is accepted meanwhile.
    {"2-halfopen", "good client accepted: no; half-open id gone: no; raccept afterwards: nothing"},
    // rlisten's backlog is not held: 6 of 6 connect, raccept returns one.
    // What follows is a race in rdma-core 44, not run on it (README.md).
    {"3-backlog", "rconnects: 0, 0, 0, 0, 0, 0; raccept: ok"},
};

void Verdict::report() {
  if (ref) {  // the contract is ours; rdma-core's run is held to what it did
    failed.clear();
    for (const auto& o : kObserved)
      if (name == o.name && o.behaviour && behaviour != o.behaviour)
        failed.push_back(fmt("rdma-core 44 no longer answers as observed: '%s'", o.behaviour));
  }
  report_now();
}

// --- case 1: protocol violations ---------------------------------------------
struct Violation {
  const char* name;
  const char* mode;
  int err;  // what ours must report
};

void case1(int l, uint16_t port, const Violation& c) {
  Verdict v(c.name, 60);
  Peer peer;
  if (!peer.start(c.mode, port)) {
    v.check(false, "spawn peer");
    v.report();
    return;
  }
  int h = accept_within(l, 10000);
  std::string line = peer.hear(10000);
  v.check(h >= 0, "raccept of the peer");
  v.check(line.rfind("connected ", 0) == 0, "peer: " + line);
  v.check(system_lib(line), "peer not on the system's librdmacm: " + line);
  unsigned credits = 0, window = 0;
  std::sscanf(line.c_str(), "connected credits=%u window=%u", &credits, &window);
  line = peer.hear(10000);
  v.check(line == "hello", "peer: " + line);
  if (h < 0 || !v.failed.empty()) {
    v.report();
    return;
  }
  // The hello has arrived and its completion is taken (the receive posted
  // again) before the peer goes on: rpoll, no read.
  int r = rpoll1(h, POLLIN, 5000);
  v.check(r > 0 && (r & POLLIN), "hello not readable: revents " + revents_str(r));

  GoodClient g;
  bool good = g.start(l, port);
  v.check(good, "good client: " + g.error);
  if (good) g.more_rounds(1, 10000);

  step = "the violation";
  peer.tell("go");
  line = peer.hear(15000);
  v.check(line.rfind("violated", 0) == 0, "peer: " + line);
  int rounds_at_violation = g.rounds;

  // What the server reads: the data before the violation, then?
  step = "reading the hostile connection";
  std::string got;
  std::vector<char> buf(1 << 17);
  std::string end;
  int read_err = 0;
  auto t0 = Clock::now();
  for (;;) {
    r = rpoll1(h, POLLIN, 3000);
    if (r == 0) { end = "nothing more within 3 s"; break; }
    ssize_t n = rrecv(h, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) { got.append(buf.data(), static_cast<size_t>(n)); continue; }
    if (n == 0) { end = "EOF"; break; }
    if (errno == EAGAIN) {
      if (since(t0) > 5) { end = "EAGAIN for 5 s, revents " + revents_str(r); break; }
      usleep(1000);
      continue;
    }
    read_err = errno;
    end = fmt("-1 %s", errname(errno));
    break;
  }
  size_t hs = got.find_first_not_of('h'), xs = 0;
  for (char ch : got) xs += ch == 'X';
  size_t as = 0;
  for (char ch : got) as += ch == 'a';
  size_t hs_n = hs == std::string::npos ? got.size() : hs;
  errno = 0;
  ssize_t sret = rsend(h, "z", 1, MSG_DONTWAIT);
  int send_err = sret < 0 ? errno : 0;
  int rev = rpoll1(h, POLLIN | POLLOUT, 0);
  // Exact: 64 'h' (the hello), the legal 'a's for credits, no 'X'.
  v.behaviour = fmt("rrecv %zu bytes (%zu h, %zu a, %zu X) then %s; rsend %zd%s%s; rpoll %s", got.size(),
                    hs_n, as, xs, end.c_str(), sret, sret < 0 ? " " : "", sret < 0 ? errname(send_err) : "",
                    revents_str(rev).c_str());
  v.note(v.behaviour);
  v.note(fmt("peer %s", line.c_str() + (line.size() > 9 ? 9 : line.size())));
  unsigned legal = 0;
  if (auto at = line.find("legal="); at != std::string::npos) std::sscanf(line.c_str() + at, "legal=%u", &legal);
  size_t want_a = legal;
  if (!ref) {
    v.check(hs_n == 64 && as == want_a && xs == 0 && got.size() == 64 + want_a,
            fmt("the data before the violation: want 64 h + %zu a, got %zu bytes", want_a, got.size()));
    v.check(read_err == c.err, fmt("rrecv ended with %s, want -1 %s", end.c_str(), errname(c.err)));
    v.check(sret < 0 && send_err == c.err, fmt("rsend %zd %s, want -1 %s", sret, errname(send_err), errname(c.err)));
    v.check(rev > 0 && (rev & POLLERR), "rpoll: no POLLERR: " + revents_str(rev));
  }
  // The good client went on meanwhile, and goes on after.
  bool more = good && g.more_rounds(2, 10000);
  v.check(more, fmt("good client stalled after the violation (%d rounds, %d at the violation)",
                    g.rounds.load(), rounds_at_violation));
  g.finish(v, "during");
  step = "rclose of the hostile connection";
  rclose(h);
  step = "the peer's exit";
  int st = peer.finish();
  v.check(st == 0, fmt("peer exit status %d", st));
  good_after(l, port, v);
  v.report();
}

// --- case 2: half-open accept --------------------------------------------------
// Counts this process's rdma_cm ids connected to `port` on this host
// (`rdma res show cm_id`: "... pid P ... dst-addr IP:PORT").
int ids_to(uint16_t port) {
  std::string cmd = fmt("rdma res show cm_id 2>/dev/null | grep -c 'pid %d .*dst-addr [0-9.]*:%u\\b'",
                        getpid(), port);
  FILE* f = popen(cmd.c_str(), "r");
  int n = -1;
  if (f) {
    if (std::fscanf(f, "%d", &n) != 1) n = -1;
    pclose(f);
  }
  return n;
}

void case2(int l, uint16_t port) {
  Verdict v("2-halfopen", ref ? 40 : 90);
  Peer peer;
  auto t0 = Clock::now();
  v.check(peer.start("halfopen", port), "spawn peer");
  std::string line = peer.hear(10000);
  unsigned pport = 0;
  std::sscanf(line.c_str(), "requested port=%u", &pport);
  v.check(pport && system_lib(line), "peer: " + line);
  if (!pport) {
    v.report();
    return;
  }
  usleep(300000);  // the request reaches the server's library
  int ids0 = ids_to(static_cast<uint16_t>(pport));
  GoodClient g;
  g.wait_ms = 5000;
  bool good = g.start(l, port);
  v.note(fmt("half-open id on the server: %d", ids0));
  v.note(fmt("good client accepted %s in %.1f s%s", good ? "yes" : "no", g.connect_secs,
             g.others.empty() ? "" : ", the half-open one came out of raccept first"));
  v.check(good && g.others.empty(), "good client while the half-open one waits: " + g.error);
  if (good) g.more_rounds(3, 10000);
  g.finish(v, "during");
  // Nothing else comes out of raccept, and the half-open id goes (within 30 s).
  step = "waiting for the half-open id to go";
  double gone = -1;
  int other = -1;
  uint16_t op = 0;
  double limit = ref ? 15 : 30;
  while (since(t0) < limit) {
    if (other < 0 && rpoll1(l, POLLIN, 0) > 0) other = raccept(l, nullptr, nullptr);
    int n = ids_to(static_cast<uint16_t>(pport));
    if (n == 0) {
      gone = since(t0);
      break;
    }
    usleep(1000000);
  }
  if (other < 0) other = accept_within(l, 0, &op);
  v.note(gone < 0 ? fmt("half-open id still there after %.0f s", limit)
                  : fmt("half-open id gone after %.1f s", gone));
  v.note(fmt("raccept afterwards: %s", other >= 0 ? "returned a connection" : "nothing"));
  v.behaviour = fmt("good client accepted: %s; half-open id gone: %s; raccept afterwards: %s",
                    !good ? "no" : g.others.empty() ? "yes" : "after the half-open one",
                    gone < 0 ? "no" : "yes", other >= 0 ? "a connection" : "nothing");
  if (!ref) {
    v.check(gone >= 0 && gone < 30, "the half-open id is not dropped within 30 s");
    v.check(other < 0, "raccept returned the half-open connection");
  }
  if (other >= 0) rclose(other);
  step = "the peer's exit";
  int st = peer.finish();
  v.check(st == 0, fmt("peer exit status %d", st));
  good_after(l, port, v);
  v.report();
}

// --- case 3: backlog -----------------------------------------------------------
// This program's QPs (`rdma res show qp`, comm hostile_server; the pid
// there is the creating thread's): how many wait in INIT (a client whose
// request has had no answer) and how many are joined to one of those (rqpn: a
// server QP that answered it). -1, -1 if rdma could not be run.
std::pair<int, int> waiting_qps() {
  FILE* f = popen("rdma res show qp 2>/dev/null", "r");
  if (!f) return {-1, -1};
  std::vector<std::pair<long, long>> init, other;  // lqpn, rqpn
  char line[512];
  while (std::fgets(line, sizeof(line), f)) {
    if (!std::strstr(line, "comm hostile_server")) continue;
    long lqpn = -1, rqpn = -1;
    if (const char* p = std::strstr(line, "lqpn ")) lqpn = std::atol(p + 5);
    if (const char* p = std::strstr(line, "rqpn ")) rqpn = std::atol(p + 5);
    (std::strstr(line, "state INIT") ? init : other).push_back({lqpn, rqpn});
  }
  pclose(f);
  int joined = 0;
  for (auto& o : other)
    for (auto& i : init) joined += o.second == i.first;
  return {static_cast<int>(init.size()), joined};
}

// The non-blocking rconnects of `socks` that have ended: 0 (connected) or the
// error, -1 while still in progress.
std::vector<int> connect_states(const std::vector<int>& socks) {
  std::vector<int> st;
  for (int s : socks) {
    pollfd p{s, POLLOUT, 0};
    int err = -1;
    if (rpoll(&p, 1, 0) > 0) {
      socklen_t len = sizeof(err);
      if (rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len)) err = errno;
    }
    st.push_back(err);
  }
  return st;
}

// As TCP's accept queue: past rlisten's backlog + 1 a request waits unanswered
// (no QP on the server) and is never refused; the kernel holds some of them,
// drops the rest without a word, and the client's CM sends those again. Each
// raccept lets the next one in.
void case3(uint16_t port) {
  // backlog + 1 answered (as TCP's accept queue holds), the rest held by the
  // kernel or sent again by their CM.
  constexpr int kBacklog = 2, kHeld = kBacklog + 1, kClients = 6;
  Verdict v("3-backlog", ref ? 30 : 90);
  int l = listener(port, kBacklog);
  std::vector<int> socks;
  step = "non-blocking rconnects without raccept";
  sockaddr_in dst = device_addr(port);
  for (int i = 0; i < kClients; ++i) {
    int s = rsocket(AF_INET, SOCK_STREAM, 0);
    rfcntl(s, F_SETFL, rfcntl(s, F_GETFL) | O_NONBLOCK);
    int r = rconnect(s, sa(&dst), sizeof(dst));
    v.check(r == 0 || errno == EINPROGRESS, fmt("rconnect %d: %s", i + 1, strerror(errno)));
    socks.push_back(s);
  }
  auto count = [](const std::vector<int>& st, int what) {
    return static_cast<int>(std::count(st.begin(), st.end(), what));
  };
  auto t0 = Clock::now();
  std::vector<int> st = connect_states(socks);
  while (count(st, 0) < kHeld && since(t0) < 10) {
    usleep(10000);
    st = connect_states(socks);
  }
  std::string answers;
  if (ref) {  // rdma-core 44 answers every request: wait for all
    while (count(st, 0) < kClients && since(t0) < 10) {
      usleep(10000);
      st = connect_states(socks);
    }
    for (int e : st) answers += fmt("%s%s", answers.empty() ? "" : ", ", e < 0 ? "waiting" : errname(e));
  } else {
    usleep(2000000);  // time for a wrongly answered request to connect (or be refused)
    st = connect_states(socks);
    auto [waiting, answered] = waiting_qps();
    v.note(fmt("rlisten(%d), no raccept, %d rconnects: after %.1f s %d connected, %d waiting; "
               "QPs in INIT %d, answering them %d", kBacklog, kClients, since(t0), count(st, 0),
               count(st, -1), waiting, answered));
    v.check(count(st, 0) == kHeld && count(st, -1) == kClients - kHeld,
            fmt("want %d connected and the rest waiting: %d connected, %d waiting", kHeld,
                count(st, 0), count(st, -1)));
    v.check(waiting >= kClients - kHeld && answered == 0,
            fmt("%d client QPs in INIT, %d QPs answering them: a waiting request has no QP on the "
                "server", waiting, answered));
  }
  // One raccept at a time lets one more in: the kernel's held ones at once,
  // the dropped ones at their CM's next try (~6.4 s apart on rxe).
  step = "raccepts";
  uint16_t pp = 0;
  int a = accept_within(l, 5000, &pp);
  v.check(a >= 0, "raccept after the backlog filled");
  if (ref) {
    // Past this point rdma-core 44 races with itself (its connect service
    // thread can block in rdma_get_cm_event while every rs_notify_svc waits
    // for it): the next rconnect hung in 24 of 25 runs, connected in one,
    // and a CI run crashed in the rcloses. Nothing to compare: stop here.
    v.behaviour = fmt("rconnects: %s; raccept: %s", answers.c_str(), a >= 0 ? "ok" : "none");
    v.report();
    std::printf("hostile_server on %s: %d failed, the rest not run\n", lib_name().c_str(), failures);
    std::fflush(stdout);
    _exit(failures ? 1 : 0);
  }
  std::vector<int> accepted;
  auto t1 = Clock::now();
  for (int i = 1; i < kClients; ++i) {
    int fd = accept_within(l, 30000);
    if (fd < 0) break;
    accepted.push_back(fd);
  }
  st = connect_states(socks);
  while (count(st, 0) < kClients && since(t1) < 30) {
    usleep(10000);
    st = connect_states(socks);
  }
  std::string ends;
  for (int e : st) ends += fmt("%s%s", ends.empty() ? "" : ", ", e < 0 ? "waiting" : errname(e));
  v.note(fmt("raccept one by one: %zu more accepted in %.1f s; rconnects: %s", accepted.size(),
             since(t1), ends.c_str()));
  v.check(accepted.size() == kClients - 1 && count(st, 0) == kClients,
          fmt("every waiting request connects once accepted: %zu accepted, rconnects %s",
              accepted.size() + 1, ends.c_str()));
  for (int fd : accepted) rclose(fd);
  // The accepted one carries data over rxe0.
  if (a >= 0) {
    int c = -1;
    for (int fd : socks) {
      sockaddr_in me{};
      socklen_t len = sizeof(me);
      if (rgetsockname(fd, sa(&me), &len) == 0 && ntohs(me.sin_port) == pp) c = fd;
    }
    if (c >= 0) rfcntl(c, F_SETFL, rfcntl(c, F_GETFL) & ~O_NONBLOCK);
    long p0 = sent_packets();
    std::vector<char> out(65536, 'g'), in(65536);
    bool sent = c >= 0 && rsend(c, out.data(), out.size(), 0) == static_cast<ssize_t>(out.size());
    size_t got = 0;
    while (sent && got < in.size()) {
      if (rpoll1(a, POLLIN, 5000) <= 0) break;
      ssize_t n = rrecv(a, in.data() + got, in.size() - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    long pkts = sent_packets() - p0;
    v.check(got == in.size() && in == out, fmt("64 KiB over the accepted connection: %zu bytes", got));
    v.check(pkts >= 64, fmt("rxe0 sent_pkts +%ld < 64", pkts));
    v.note(fmt("64 KiB over the accepted one, rxe0 +%ld pkts", pkts));
    rclose(a);
  }
  step = "rclose of every connection";
  for (int fd : socks) rclose(fd);
  // Drain whatever the library still holds for the listener.
  for (int fd; (fd = accept_within(l, 200)) >= 0;) rclose(fd);
  rclose(l);
  v.report();
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--peer")) peer_path = argv[i + 1];
    if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
  }
  if (!peer_path) {
    std::fprintf(stderr, "usage: hostile_server --peer PATH [--only CASE]\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  ref = reference();
  // --only 1 runs 1a..1f; --only 1b-window that one.
  auto wanted = [&](const char* name) { return only.empty() || std::string(name).rfind(only, 0) == 0; };
  auto t0 = Clock::now();
  std::printf("hostile_server on %s (%s), peer %s\n", lib_name().c_str(), device_ip().c_str(), peer_path);
  const uint16_t port = 7491, backlog_port = 7492;
  const Violation violations[] = {
      {"1a-credits", "credits", EPROTO}, {"1b-window", "window", EPROTO},
      {"1c-zero-length", "zero", EPROTO}, {"1d-no-imm", "noimm", EPROTO},
      {"1e-unknown-op", "badop", EPROTO}, {"1f-failed-recv", "badrecv", ECONNRESET},
  };
  std::thread([] {
    for (;;) {
      sleep(1);
      long d = case_deadline;
      long now = std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
      if (!d || now < d) continue;
      // On rdma-core's, being stuck is what it does: compared as observed.
      std::string seen = fmt("stuck at '%s' in %s", step.load(), call.load());
      const char* want = nullptr;
      for (const auto& o : kObserved)
        if (!std::strcmp(o.name, case_name.load())) want = o.behaviour;
      bool ok = ref && (!want || seen == want);
      std::printf("CASE %s [%s]: %s\n", case_name.load(), lib_name().c_str(), seen.c_str());
      if (ref && !ok) std::printf("  FAIL %s [%s]: rdma-core 44 no longer answers as observed: '%s'\n",
                                  case_name.load(), lib_name().c_str(), want);
      std::printf("%s %s [%s]\n", ok ? "PASS" : "FAIL", case_name.load(), lib_name().c_str());
      std::printf("hostile_server on %s: %d failed, then stuck\n", lib_name().c_str(), failures + !ok);
      std::fflush(stdout);
      _exit(ok && !failures ? 0 : 1);
    }
  }).detach();
  if (wanted("3-backlog")) case3(backlog_port);
  int l = listener(port, 8);
  for (const auto& c : violations)
    if (wanted(c.name)) case1(l, port, c);
  // Last: rdma-core 44's listener stays blocked on the half-open connection.
  if (wanted("2-halfopen")) case2(l, port);
  step = "rclose of the listener";
  rclose(l);
  std::printf("hostile_server on %s: %d failed, %.0f s\n", lib_name().c_str(), failures, since(t0));
  return failures ? 1 : 0;
}
