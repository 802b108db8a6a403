// repoll_* on connected rsocket streams over the device: level- and
// edge-triggered readiness for reading and writing, one-shot, the peer's
// hang-up, a listener's incoming connection, a non-blocking connect, a set
// mixing an rsocket and a pipe, and a sleeping waiter woken by data without
// spinning. Ours only: rdma-core 44's library has no RDMACM_1.5.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rdma/rsocket.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../common/time_scale.h"
#include "rsocket_pair.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::scaled_ms;

struct Set {
  int ep = repoll_create(EPOLL_CLOEXEC);
  epoll_event got[8] = {};
  Set() { EXPECT_GE(ep, 0) << strerror(errno); }
  ~Set() { rclose(ep); }
  int ctl(int op, int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    return repoll_ctl(ep, op, fd, &ev);
  }
  int add(int fd, uint32_t events, uint64_t data) { return ctl(EPOLL_CTL_ADD, fd, events, data); }
  // (A test that expects nothing gives the time it looks; one that expects
  // an event scales its bound: tests/common/time_scale.h.)
  int wait(int timeout) { return repoll_wait(ep, got, 8, timeout); }
  // The events of the one member a wait reports (0, and a failure, if not
  // one) within timeout ms, scaled.
  uint32_t one(int timeout) {
    int n = wait(scaled_ms(timeout));
    EXPECT_EQ(n, 1);
    return n == 1 ? got[0].events : 0;
  }
  // The events reported for data, 0 if none.
  uint32_t of(int n, uint64_t data) const {
    for (int i = 0; i < n; ++i)
      if (got[i].data.u64 == data) return got[i].events;
    return 0;
  }
};

// Sends len bytes from one end of the pair and checks they crossed rxe0.
void send_over_device(int s, size_t len) {
  long before = sent_packets();
  std::string data(len, 'r');
  ASSERT_EQ(rsend(s, data.data(), data.size(), 0), ssize_t(len)) << strerror(errno);
  EXPECT_GT(sent_packets(), before) << "the bytes did not cross rxe0";
}

void drain(int s, size_t len) {
  std::vector<char> buf(len);
  ASSERT_EQ(recv_all(s, buf.data(), len), ssize_t(len));
}

TEST(Repoll, LevelTriggeredReadableWhileDataIsUnreadWritableWhileRoom) {
  Pair p(7620);
  Set set;
  ASSERT_EQ(set.add(p.server, EPOLLIN | EPOLLOUT, 1), 0) << strerror(errno);
  EXPECT_EQ(set.one(1000), uint32_t(EPOLLOUT));  // room to send, nothing to read
  send_over_device(p.client, 4096);
  EXPECT_EQ(set.one(5000), uint32_t(EPOLLIN | EPOLLOUT));
  EXPECT_EQ(set.got[0].data.u64, 1u);
  EXPECT_EQ(set.one(0), uint32_t(EPOLLIN | EPOLLOUT));  // level: again, nothing read yet
  drain(p.server, 4096);
  EXPECT_EQ(set.one(0), uint32_t(EPOLLOUT));
}

TEST(Repoll, EdgeTriggeredReportsNewDataOnce) {
  Pair p(7621);
  Set set;
  ASSERT_EQ(set.add(p.server, EPOLLIN | EPOLLET, 2), 0);
  EXPECT_EQ(set.wait(200), 0);
  send_over_device(p.client, 100);
  EXPECT_EQ(set.one(5000), uint32_t(EPOLLIN));
  EXPECT_EQ(set.wait(300), 0);  // still unread, but nothing new
  send_over_device(p.client, 100);
  EXPECT_EQ(set.one(5000), uint32_t(EPOLLIN));  // new data: again
  drain(p.server, 200);
  EXPECT_EQ(set.wait(300), 0);
}

// (The server joins the set after the client's check: its first look sends
// the client credits, activity of the client's own that may report it again.)
TEST(Repoll, EdgeTriggeredWritableOnceAndOneShotUntilModified) {
  Pair p(7622);
  Set set;
  ASSERT_EQ(set.add(p.client, EPOLLOUT | EPOLLET, 3), 0);
  ASSERT_EQ(set.wait(scaled_ms(1000)), 1);
  EXPECT_EQ(set.of(1, 3), uint32_t(EPOLLOUT));
  EXPECT_EQ(set.wait(300), 0);  // writable still, not new
  ASSERT_EQ(set.ctl(EPOLL_CTL_DEL, p.client, 0, 0), 0);
  ASSERT_EQ(set.add(p.server, EPOLLIN | EPOLLONESHOT, 4), 0);
  EXPECT_EQ(set.wait(200), 0);
  send_over_device(p.client, 10);
  ASSERT_EQ(set.wait(scaled_ms(5000)), 1);
  EXPECT_EQ(set.of(1, 4), uint32_t(EPOLLIN));
  send_over_device(p.client, 10);
  EXPECT_EQ(set.wait(300), 0);  // one-shot: disarmed
  ASSERT_EQ(set.ctl(EPOLL_CTL_MOD, p.server, EPOLLIN, 5), 0);
  ASSERT_EQ(set.wait(scaled_ms(1000)), 1);
  EXPECT_EQ(set.of(1, 5), uint32_t(EPOLLIN));
}

// An edge-triggered writer that filled the connection (EAGAIN) hears of the
// room the peer's reading makes, though the set never saw it full.
TEST(Repoll, EdgeTriggeredWriterHearsOfRoomAfterEagain) {
  Pair p(7628);
  ASSERT_EQ(rfcntl(p.client, F_SETFL, O_NONBLOCK), 0);
  Set set;
  ASSERT_EQ(set.add(p.client, EPOLLOUT | EPOLLET, 9), 0);
  ASSERT_EQ(set.wait(scaled_ms(1000)), 1);
  std::vector<char> chunk(64 * 1024, 'w');
  size_t total = 0;
  long before = sent_packets();
  for (;;) {
    ssize_t n = rsend(p.client, chunk.data(), chunk.size(), 0);
    if (n < 0) {
      ASSERT_EQ(errno, EAGAIN) << strerror(errno);
      break;
    }
    total += static_cast<size_t>(n);
    ASSERT_LT(total, size_t(1) << 30) << "never full";
  }
  std::vector<char> in(total);
  ASSERT_EQ(recv_all(p.server, in.data(), total), ssize_t(total));
  EXPECT_GT(sent_packets() - before, long(total / 4096) - 1) << "the bytes did not cross rxe0";
  EXPECT_EQ(set.one(3000), uint32_t(EPOLLOUT));  // before the 5 s safety net
}

TEST(Repoll, HangUpWhenThePeerCloses) {
  Pair p(7623);
  Set set;
  ASSERT_EQ(set.add(p.server, EPOLLIN | EPOLLRDHUP, 6), 0);
  EXPECT_EQ(set.wait(200), 0);
  rclose(p.client);
  p.client = -1;
  // First the end of the peer's writing (readable: end of file), then the
  // disconnect; level-triggered, each wait reports what holds.
  ASSERT_EQ(set.wait(scaled_ms(5000)), 1);
  EXPECT_EQ(set.got[0].events & (EPOLLIN | EPOLLRDHUP), uint32_t(EPOLLIN | EPOLLRDHUP));
  auto until = Clock::now() + test::scaled(5s);
  while (!(set.got[0].events & EPOLLHUP) && Clock::now() < until) {
    ASSERT_EQ(set.wait(scaled_ms(5000)), 1);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(set.got[0].events & EPOLLHUP) << std::hex << set.got[0].events;
  char c;
  EXPECT_EQ(rrecv(p.server, &c, 1, 0), 0);  // end of file, as reported
}

// As tcp_poll: one's own SHUT_RDWR is a hang-up (with readable: a read
// returns 0); SHUT_WR alone leaves the socket writable and nothing else.
TEST(Repoll, HangUpAfterOwnShutdownOfBothDirections) {
  for (int how : {SHUT_WR, SHUT_RDWR}) {
    Pair p(7646 + how);
    Set set;
    ASSERT_EQ(set.add(p.client, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 9), 0);
    ASSERT_EQ(rshutdown(p.client, how), 0) << strerror(errno);
    uint32_t expected = how == SHUT_WR ? uint32_t(EPOLLOUT)
                                       : uint32_t(EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP);
    EXPECT_EQ(set.one(5000), expected) << "how " << how << ": " << std::hex << set.got[0].events;
  }
}

TEST(Repoll, AListenerIsReadableOnAnIncomingConnection) {
  int l = listener(7624);
  Set set;
  ASSERT_EQ(set.add(l, EPOLLIN, 7), 0);
  EXPECT_EQ(set.wait(200), 0);
  int c = rsocket(AF_INET, SOCK_STREAM, 0);
  std::thread connecter([&] {
    sockaddr_in a = device_addr(7624);
    EXPECT_EQ(rconnect(c, sa(&a), sizeof(a)), 0) << strerror(errno);
  });
  EXPECT_EQ(set.one(5000), uint32_t(EPOLLIN));
  int s = raccept(l, nullptr, nullptr);
  EXPECT_GE(s, 0) << strerror(errno);
  connecter.join();
  EXPECT_EQ(set.wait(200), 0);  // accepted: nothing more
  rclose(s);
  rclose(c);
  rclose(l);
}

// The socket's wake-up moves from its CM channel to its CQ's as it connects.
TEST(Repoll, ANonBlockingConnectBecomesWritable) {
  int l = listener(7625);
  int server = -1;
  std::thread accepter([&] { server = raccept(l, nullptr, nullptr); });
  int c = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rfcntl(c, F_SETFL, O_NONBLOCK), 0);
  Set set;
  ASSERT_EQ(set.add(c, EPOLLOUT | EPOLLIN, 8), 0);
  sockaddr_in a = device_addr(7625);
  int r = rconnect(c, sa(&a), sizeof(a));
  EXPECT_TRUE(r == 0 || errno == EINPROGRESS) << strerror(errno);
  EXPECT_EQ(set.one(5000), uint32_t(EPOLLOUT));
  accepter.join();
  ASSERT_GE(server, 0);
  send_over_device(server, 64);
  EXPECT_EQ(set.one(5000), uint32_t(EPOLLIN | EPOLLOUT));
  rclose(server);
  rclose(c);
  rclose(l);
}

TEST(Repoll, OneSetHoldsAnRsocketAndAPipe) {
  Pair p(7626);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  Set set;
  ASSERT_EQ(set.add(p.server, EPOLLIN, 10), 0);
  ASSERT_EQ(set.add(pipe_fds[0], EPOLLIN, 11), 0);
  EXPECT_EQ(set.wait(200), 0);
  ASSERT_EQ(write(pipe_fds[1], "p", 1), 1);
  ASSERT_EQ(set.wait(scaled_ms(1000)), 1);
  EXPECT_EQ(set.got[0].data.u64, 11u);
  send_over_device(p.client, 10);
  int n = set.wait(scaled_ms(5000));
  ASSERT_EQ(n, 2);
  EXPECT_EQ(set.of(n, 10), uint32_t(EPOLLIN));
  EXPECT_EQ(set.of(n, 11), uint32_t(EPOLLIN));
  ASSERT_EQ(set.ctl(EPOLL_CTL_DEL, pipe_fds[0], 0, 0), 0);
  ASSERT_EQ(set.ctl(EPOLL_CTL_DEL, p.server, 0, 0), 0);
  EXPECT_EQ(set.wait(0), 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

double thread_cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_THREAD, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Asleep (not spinning) until the data comes, and woken by it well within
// wake_up_interval (5 s), the safety net, which would wake it no sooner than
// 5 s into the wait (the data comes after 1 s). The bound is scaled, but
// never to the safety net's 5 s, where it would prove nothing.
TEST(Repoll, ABlockedWaitSleepsUntilDataWakesIt) {
  Pair p(7627);
  Set set;
  ASSERT_EQ(set.add(p.server, EPOLLIN, 12), 0);
  int n = -2;
  double cpu = 0, waited = 0;
  std::thread waiter([&] {
    double before = thread_cpu_seconds();
    auto t = Clock::now();
    n = set.wait(-1);
    waited = std::chrono::duration<double>(Clock::now() - t).count();
    cpu = thread_cpu_seconds() - before;
  });
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(n, -2);  // still asleep
  send_over_device(p.client, 32);
  waiter.join();
  ASSERT_EQ(n, 1);
  EXPECT_EQ(set.got[0].data.u64, 12u);
  EXPECT_LT(waited, std::min(test::scaled_s(3), 5.0)) << "not woken by the data";
  EXPECT_LT(cpu, 0.2) << "the waiter spun";
}

// As redis-benchmark's event loop does: the connection leaves the set after
// each reply and joins it again (for writing, then for reading) around each
// request. Each reply must wake the wait; a wake-up taken on re-joining and
// not re-armed left the waiter asleep until its timeout, every time.
TEST(Repoll, AConnectionThatLeavesAndRejoinsTheSetIsWokenByEachReply) {
  Pair p(7628);
  int flags = rfcntl(p.client, F_GETFL);
  ASSERT_EQ(rfcntl(p.client, F_SETFL, flags | O_NONBLOCK), 0);
  long before = sent_packets();
  std::thread echo([&] {  // a server on a set of its own, as redis-server
    Set server;
    server.add(p.server, EPOLLIN, 3);
    char b[16];
    for (int i = 0; i < 20; i++) {
      if (server.wait(scaled_ms(5000)) != 1 || recv_all(p.server, b, sizeof b) != ssize_t(sizeof b)) return;
      rsend(p.server, b, sizeof b, 0);
    }
  });
  struct Join {
    std::thread& t;
    int fd;
    ~Join() {
      rshutdown(fd, SHUT_RDWR);  // ends the echo if a round failed
      t.join();
    }
  } join{echo, p.client};
  Set set;
  char b[16] = {};
  for (int i = 0; i < 20; i++) {
    ASSERT_EQ(set.add(p.client, EPOLLOUT, 1), 0);
    ASSERT_EQ(set.wait(scaled_ms(2000)), 1) << "round " << i << ": not writable";
    ASSERT_EQ(rsend(p.client, b, sizeof b, 0), ssize_t(sizeof b));
    ASSERT_EQ(set.ctl(EPOLL_CTL_DEL, p.client, 0, 0), 0);
    ASSERT_EQ(set.add(p.client, EPOLLIN, 2), 0);
    ssize_t n;
    while ((n = rrecv(p.client, b, sizeof b, 0)) < 0 && errno == EAGAIN)
      ASSERT_EQ(set.wait(scaled_ms(2000)), 1) << "round " << i << ": the reply did not wake the wait";
    ASSERT_EQ(n, ssize_t(sizeof b));
    ASSERT_EQ(set.ctl(EPOLL_CTL_DEL, p.client, 0, 0), 0);
  }
  EXPECT_GE(sent_packets() - before, 40);
}

}  // namespace
}  // namespace rdmacm::rxe
