// librspreload.so's fork mode (RDMAV_FORK_SAFE=1) against peers that do not
// play their part in the move to RDMA (preload/fork.h): a plain TCP peer
// (raw system calls, which the preload never sees) that never follows with
// RDMA or never announces, one that talks first, and an impostor process
// (fork_impostor) that rconnects to the server's port first. Each move ends
// within its deadline on RDMA or on TCP with every byte intact, and the
// process's other sockets are not held up meanwhile. Runs under the preload
// with RDMAV_FORK_SAFE=1 (rxe.preload); the ordinary fork move is
// PreloadFork in preload_test.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../common/time_scale.h"
#include "rxe_env.h"

extern char** environ;

namespace rdmacm::rxe {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using rdmacm::test::scaled;

// The preload's deadlines (preload/fork_peer.h): the passive side's wait for
// the RDMA connection after its announcement, the active side's for the
// announcement. Bounds that say how long a wait may take add a scaled margin.
constexpr milliseconds kPeerWait{3000};
constexpr milliseconds kAnnouncementWait{6000};

sockaddr* sa(sockaddr_in* a) { return reinterpret_cast<sockaddr*>(a); }

bool fork_safe() { return getenv("RDMAV_FORK_SAFE") && atoi(getenv("RDMAV_FORK_SAFE")); }

int listening(uint16_t port) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(bind(l, sa(&a), sizeof a), 0) << strerror(errno);
  EXPECT_EQ(listen(l, 4), 0) << strerror(errno);
  return l;
}

// A plain TCP end the preload never sees (raw system calls).
namespace plain {
int connected(uint16_t port) {
  int fd = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0));
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(syscall(SYS_connect, fd, sa(&a), sizeof a), 0) << strerror(errno);
  return fd;
}
int listening(uint16_t port) {
  int l = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0));
  int one = 1;
  syscall(SYS_setsockopt, l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(syscall(SYS_bind, l, sa(&a), sizeof a), 0) << strerror(errno);
  EXPECT_EQ(syscall(SYS_listen, l, 4), 0);
  return l;
}
std::string read_n(int fd, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  while (got < n) {
    long r = syscall(SYS_read, fd, &s[got], n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  s.resize(got);
  return s;
}
void write_str(int fd, const std::string& s) {
  EXPECT_EQ(syscall(SYS_write, fd, s.data(), s.size()), (long)s.size());
}
void close_fd(int fd) { syscall(SYS_close, fd); }
}  // namespace plain

std::string read_n(int fd, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, &s[got], n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  s.resize(got);
  return s;
}

const std::string kAnnouncement(4, '\0');

TEST(PreloadForkHostile, AClientThatNeverFollowsCostsTheServerItsDeadlineAndTcpCarriesOn) {
  if (!fork_safe()) GTEST_SKIP() << "runs with RDMAV_FORK_SAFE=1";
  int l = listening(7641);
  int c = plain::connected(7641);
  int s = accept(l, nullptr, nullptr);
  ASSERT_GE(s, 0) << strerror(errno);
  auto start = Clock::now();
  ASSERT_EQ(write(s, "hello", 5), 5) << strerror(errno);  // the move: announce, wait, give up
  auto took = Clock::now() - start;
  EXPECT_LT(took, kPeerWait + scaled(milliseconds(2000)));
  // The announcement went out before the server knew its peer; then its bytes.
  EXPECT_EQ(plain::read_n(c, 9), kAnnouncement + "hello");
  plain::write_str(c, "world");
  EXPECT_EQ(read_n(s, 5), "world");
  plain::close_fd(c);
  close(s);
  close(l);
}

TEST(PreloadForkHostile, AClientThatTalksFirstKeepsTheServerOnTcpWithoutAWait) {
  if (!fork_safe()) GTEST_SKIP() << "runs with RDMAV_FORK_SAFE=1";
  int l = listening(7642);
  int c = plain::connected(7642);
  int s = accept(l, nullptr, nullptr);
  ASSERT_GE(s, 0) << strerror(errno);
  plain::write_str(c, "ping");
  std::this_thread::sleep_for(milliseconds(100));  // the bytes reach the server's socket
  auto start = Clock::now();
  EXPECT_EQ(read_n(s, 4), "ping");
  EXPECT_LT(Clock::now() - start, scaled(milliseconds(1000)));
  ASSERT_EQ(write(s, "pong", 4), 4);
  EXPECT_EQ(plain::read_n(c, 4), "pong") << "a client that talks TCP is announced nothing";
  plain::close_fd(c);
  close(s);
  close(l);
}

TEST(PreloadForkHostile, AServerThatNeverAnnouncesCostsTheClientItsDeadlineAndTcpCarriesOn) {
  if (!fork_safe()) GTEST_SKIP() << "runs with RDMAV_FORK_SAFE=1";
  int l = plain::listening(7643);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = device_addr(7643);
  ASSERT_EQ(connect(c, sa(&a), sizeof a), 0) << strerror(errno);
  int s = static_cast<int>(syscall(SYS_accept4, l, nullptr, nullptr, 0));
  ASSERT_GE(s, 0);
  auto start = Clock::now();
  ASSERT_EQ(write(c, "hello", 5), 5) << strerror(errno);  // the move: wait for the zero, give up
  auto took = Clock::now() - start;
  EXPECT_LT(took, kAnnouncementWait + scaled(milliseconds(2000)));
  EXPECT_EQ(plain::read_n(s, 5), "hello");
  plain::write_str(s, "world");
  EXPECT_EQ(read_n(c, 5), "world");
  close(c);
  plain::close_fd(s);
  plain::close_fd(l);
}

TEST(PreloadForkHostile, AMoveThatWaitsHoldsUpNoOtherSocket) {
  if (!fork_safe()) GTEST_SKIP() << "runs with RDMAV_FORK_SAFE=1";
  int l = listening(7644);
  int c1 = plain::connected(7644);
  int s1 = accept(l, nullptr, nullptr);
  ASSERT_GE(s1, 0);
  std::thread mover([&] { EXPECT_EQ(write(s1, "x", 1), 1); });  // waits kPeerWait for c1
  std::this_thread::sleep_for(milliseconds(300));
  // Meanwhile the same listener accepts (rdma-core 44 and ours before: one
  // process-wide lock held across the wait kept every fork-pending socket's
  // calls, the listener's accept among them, waiting behind it).
  int c2 = plain::connected(7644);
  auto start = Clock::now();
  int s2 = accept(l, nullptr, nullptr);
  EXPECT_GE(s2, 0) << strerror(errno);
  EXPECT_LT(Clock::now() - start, scaled(milliseconds(1000)));
  sockaddr_in where{};
  socklen_t len = sizeof where;
  EXPECT_EQ(getsockname(l, sa(&where), &len), 0);
  EXPECT_LT(Clock::now() - start, scaled(milliseconds(1000)));
  mover.join();
  EXPECT_EQ(plain::read_n(c1, 5), kAnnouncement + "x");
  plain::close_fd(c1);
  plain::close_fd(c2);
  close(s1);
  if (s2 >= 0) close(s2);
  close(l);
}

// A helper program started beside this process, with its stdout: not
// under the preload (it makes its own rsockets), or `preloaded` as this
// process is (LD_PRELOAD and RDMAV_FORK_SAFE kept).
struct Spawned {
  pid_t pid = -1;
  int out = -1;
  Spawned(std::vector<std::string> args, bool preloaded) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    posix_spawn_file_actions_t acts;
    posix_spawn_file_actions_init(&acts);
    posix_spawn_file_actions_adddup2(&acts, p[1], 1);
    posix_spawn_file_actions_addclose(&acts, p[0]);
    std::vector<char*> env;
    for (char** e = environ; *e; e++)
      if (preloaded || (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "RDMAV_FORK_SAFE=", 16)))
        env.push_back(*e);
    env.push_back(nullptr);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid, argv[0], &acts, nullptr, argv.data(), env.data()), 0);
    posix_spawn_file_actions_destroy(&acts);
    close(p[1]);
    out = p[0];
  }
  // Its next line within `limit` ("" if none).
  std::string line(milliseconds limit) {
    std::string s;
    auto end = Clock::now() + limit;
    char ch;
    while (Clock::now() < end) {
      pollfd p{out, POLLIN, 0};
      int left = static_cast<int>(
          std::chrono::duration_cast<milliseconds>(end - Clock::now()).count());
      if (poll(&p, 1, left > 0 ? left : 0) <= 0) continue;
      if (read(out, &ch, 1) != 1) break;
      if (ch == '\n') return s;
      s += ch;
    }
    return s;
  }
  int status() {
    int st = -1;
    waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ~Spawned() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    close(out);
  }
};

std::string pattern(size_t n) {
  std::string v(n, '\0');
  for (size_t i = 0; i < n; i++) v[i] = static_cast<char>(i * 7 + i / 4096);
  return v;
}

TEST(PreloadForkHostile, AnImpostorThatConnectsFirstIsRefusedAndTheClientMoves) {
  if (!fork_safe()) GTEST_SKIP() << "runs with RDMAV_FORK_SAFE=1";
  long before = sent_packets();
  int l = listening(7645);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = device_addr(7645);
  ASSERT_EQ(connect(c, sa(&a), sizeof a), 0) << strerror(errno);
  int s = accept(l, nullptr, nullptr);
  ASSERT_GE(s, 0);
  // The impostor tries the port from before the server listens there.
  Spawned imp({RDMACM_FORK_IMPOSTOR, device_ip(), "7645",
               std::to_string(scaled(milliseconds(10000)).count())},
              false);
  std::this_thread::sleep_for(milliseconds(200));
  const std::string data = pattern(64 * 1024);
  std::thread server([&] {
    size_t put = 0;
    while (put < data.size()) {  // the first write moves: listen, announce, accept
      ssize_t n = write(s, data.data() + put, data.size() - put);
      ASSERT_GT(n, 0) << strerror(errno);
      put += static_cast<size_t>(n);
    }
    EXPECT_EQ(read_n(s, 1), "k");
  });
  std::string first = imp.line(scaled(milliseconds(10000)));
  ASSERT_EQ(first.rfind("connected from port", 0), 0u) << "impostor: '" << first << "'";
  // Only now the client's first call: it moves, behind the impostor.
  EXPECT_EQ(read_n(c, data.size()), data);
  ASSERT_EQ(write(c, "k", 1), 1);
  server.join();
  EXPECT_EQ(imp.line(scaled(milliseconds(12000))), "ended: 0 bytes") << "the impostor was served";
  EXPECT_EQ(imp.status(), 0);
  EXPECT_GE(sent_packets() - before, 32) << "the connection stayed on TCP";
  close(c);
  close(s);
  close(l);
}

// Whether process `pid` has an RDMA device open (a uverbs descriptor).
bool has_device_open(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd/";
  for (int fd = 0; fd < 1024; fd++) {
    char target[256];
    ssize_t n = readlink((dir + std::to_string(fd)).c_str(), target, sizeof target - 1);
    if (n > 0 && std::string(target, static_cast<size_t>(n)).rfind("/dev/infiniband/uverbs", 0) == 0)
      return true;
  }
  return false;
}

// The passive side's wait (kPeerWait, from its announcement) is the peer's:
// a process that had opened no RDMA device before its move opens one before
// it announces, not when the peer's connection request comes. Opened then,
// a loaded host spent the wait on the server's own start-up (over a second
// in libibverbs' first look at the devices, after the client's own), and the
// server gave up on a client whose connection was a moment from done: that
// client, rdma-core's, then waited for ever (preload case
// rstream-fork-rdma-core-client, tests/FLAKY.md).
TEST(PreloadForkHostile, APassiveMoveOpensItsDeviceBeforeItAnnounces) {
  if (!fork_safe()) GTEST_SKIP() << "runs with RDMAV_FORK_SAFE=1";
  Spawned srv({RDMACM_FORK_PASSIVE_SERVER, device_ip(), "7677"}, true);
  int c = -1;
  for (auto end = Clock::now() + scaled(milliseconds(10000)); c < 0 && Clock::now() < end;) {
    c = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0));
    sockaddr_in a = device_addr(7677);
    if (syscall(SYS_connect, c, sa(&a), sizeof a) == 0) break;
    plain::close_fd(c);
    c = -1;
    std::this_thread::sleep_for(milliseconds(20));  // the server's listen comes (no event to wait on)
  }
  ASSERT_GE(c, 0) << "the server never listened";
  pollfd p{c, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, static_cast<int>(scaled(milliseconds(10000)).count())), 1) << "no announcement";
  EXPECT_EQ(plain::read_n(c, 4), kAnnouncement);
  EXPECT_TRUE(has_device_open(srv.pid)) << "the server announced before it opened its RDMA device";
  plain::write_str(c, "y");  // bytes: the server stays on TCP at once
  EXPECT_EQ(plain::read_n(c, 1), "x");
  plain::close_fd(c);
  EXPECT_EQ(srv.line(scaled(milliseconds(10000))), "read: 1 bytes");
  EXPECT_EQ(srv.status(), 0);
}

}  // namespace
}  // namespace rdmacm::rxe
