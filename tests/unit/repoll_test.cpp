// repoll_create / repoll_ctl / repoll_wait over ordinary fds (pipes,
// eventfds, socket pairs) and unconnected rsockets (the fake kernel gives
// them their CM id): epoll(7)'s semantics, and every misuse's errno.
// Connected rsockets are tests/rxe/repoll_test.cpp's.
#include <rdma/rsocket.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fixture.h"
#include "rsocket/state_change.h"

namespace rdmacm::testing {
namespace {

using Clock = std::chrono::steady_clock;

int ms_since(Clock::time_point t) {
  return static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

class RepollTest : public CmTest {
 protected:
  void SetUp() override {
    CmTest::SetUp();
    ep = repoll_create(0);
    ASSERT_GE(ep, 0) << strerror(errno);
  }
  void TearDown() override {
    if (ep >= 0) {
      EXPECT_EQ(rclose(ep), 0);
    }
    CmTest::TearDown();
  }
  int add(int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    return repoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  int mod(int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    return repoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
  }
  // One wait; the events in got[].
  int wait(int timeout) { return repoll_wait(ep, got, 8, timeout); }

  int ep = -1;
  epoll_event got[8] = {};
};

void put(int fd, uint64_t n = 1) { ASSERT_EQ(write(fd, &n, sizeof(n)), 8); }
void take(int fd) {
  uint64_t n;
  ASSERT_EQ(read(fd, &n, sizeof(n)), 8);
}

TEST_F(RepollTest, CreateTakesEpollCreate1sFlagsOnly) {
  EXPECT_EQ(fcntl(ep, F_GETFD) & FD_CLOEXEC, 0);
  int e = repoll_create(EPOLL_CLOEXEC);
  ASSERT_GE(e, 0);
  EXPECT_EQ(fcntl(e, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ(rclose(e), 0);
  EXPECT_FAILS_WITH(rclose(e), EBADF);
  EXPECT_FAILS_WITH(repoll_create(1), EINVAL);
  EXPECT_FAILS_WITH(repoll_create(-1), EINVAL);
  // Not a socket; the socket calls say so.
  char c;
  EXPECT_FAILS_WITH(rrecv(ep, &c, 1, 0), ENOTSOCK);
  EXPECT_FAILS_WITH(rsend(ep, &c, 1, 0), ENOTSOCK);
  EXPECT_FAILS_WITH(rlisten(ep, 1), ENOTSOCK);
}

// A set is a file of the wing but not a socket: every socket call answers
// as on a kernel epoll fd (ENOTSOCK), the riomap calls as rdma-core's do on
// a socket without them (EINVAL); a bad vector is EINVAL first, as
// rwritev/rreadv check it before the socket. rfcntl and rpoll see the fd.
TEST_F(RepollTest, SocketCallsOnASetAnswerAsOnAKernelEpollFd) {
  char c = 0;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  auto* sa = reinterpret_cast<sockaddr*>(&sin);
  socklen_t len = sizeof(sin);
  int v = 1;
  iovec iov{&c, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  EXPECT_FAILS_WITH(rbind(ep, sa, sizeof(sin)), ENOTSOCK);
  EXPECT_FAILS_WITH(rlisten(ep, 1), ENOTSOCK);
  EXPECT_FAILS_WITH(raccept(ep, nullptr, nullptr), ENOTSOCK);
  EXPECT_FAILS_WITH(rconnect(ep, sa, sizeof(sin)), ENOTSOCK);
  EXPECT_FAILS_WITH(rshutdown(ep, SHUT_RDWR), ENOTSOCK);
  EXPECT_FAILS_WITH(rgetpeername(ep, sa, &len), ENOTSOCK);
  EXPECT_FAILS_WITH(rgetsockname(ep, sa, &len), ENOTSOCK);
  EXPECT_FAILS_WITH(rsetsockopt(ep, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), ENOTSOCK);
  len = sizeof(v);
  EXPECT_FAILS_WITH(rgetsockopt(ep, SOL_SOCKET, SO_KEEPALIVE, &v, &len), ENOTSOCK);
  EXPECT_FAILS_WITH(rrecv(ep, &c, 1, MSG_DONTWAIT), ENOTSOCK);
  EXPECT_FAILS_WITH(rsend(ep, &c, 1, 0), ENOTSOCK);
  len = sizeof(sin);
  EXPECT_FAILS_WITH(rrecvfrom(ep, &c, 1, MSG_DONTWAIT, sa, &len), ENOTSOCK);
  EXPECT_FAILS_WITH(rsendto(ep, &c, 1, 0, sa, sizeof(sin)), ENOTSOCK);
  EXPECT_FAILS_WITH(rreadv(ep, &iov, 1), ENOTSOCK);
  EXPECT_FAILS_WITH(rwritev(ep, &iov, 1), ENOTSOCK);
  EXPECT_FAILS_WITH(rreadv(ep, &iov, -1), EINVAL);
  EXPECT_FAILS_WITH(rwritev(ep, nullptr, 1), EINVAL);
  EXPECT_FAILS_WITH(rrecvmsg(ep, &msg, MSG_DONTWAIT), ENOTSOCK);
  EXPECT_FAILS_WITH(rsendmsg(ep, &msg, 0), ENOTSOCK);
  EXPECT_FAILS_WITH(rrecvmsg(ep, nullptr, 0), EFAULT);
  EXPECT_FAILS_WITH(riomap(ep, &c, 1, PROT_WRITE, 0, -1), EINVAL);
  EXPECT_FAILS_WITH(riounmap(ep, &c, 1), EINVAL);
  errno = 0;
  EXPECT_EQ(riowrite(ep, &c, 1, 0, 0), static_cast<size_t>(-1));
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rfcntl(ep, F_GETFL), 0);
  EXPECT_EQ(rfcntl(ep, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(rfcntl(ep, F_GETFL), O_NONBLOCK);
  EXPECT_NE(fcntl(ep, F_GETFL) & O_NONBLOCK, 0);  // the kernel fd's, too
  pollfd p{ep, POLLIN, 0};
  EXPECT_EQ(rpoll(&p, 1, 0), 0);  // an empty set: nothing to read
}

// One broadcast for rpoll's sleepers and repoll's sets: a set's hold makes
// every announcement a write (an edge for each set); sleepers are woken once
// a round, and the last one out empties it.
TEST(StateChange, OneBroadcastForSleepersAndSets) {
  using namespace rdmacm::rsocket;
  auto readable = [](int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  int a = sleep_begin();
  ASSERT_GE(a, 0);
  sleep_end(false);  // the last one out: empty
  EXPECT_FALSE(readable(a));
  announce_state_change(3);  // nobody listens: nothing written
  EXPECT_FALSE(readable(a));

  uint64_t cursor;
  int fd = state_change_subscribe(&cursor);  // a set
  ASSERT_EQ(fd, a);
  announce_state_change(3);
  EXPECT_TRUE(readable(fd));

  EXPECT_EQ(sleep_begin(), fd);
  EXPECT_EQ(sleep_begin(), fd);
  announce_state_change(3);               // a round of wake-ups begins
  EXPECT_EQ(sleep_begin(), -EAGAIN);      // re-check first
  sleep_end(true);
  EXPECT_TRUE(readable(fd));              // the other sleeper has yet to wake
  sleep_end(true);                        // the last: the round ends
  EXPECT_FALSE(readable(fd));
  EXPECT_EQ(sleep_begin(), fd);
  sleep_end(false);
  state_change_unsubscribe();
}

// A set reads which sockets changed since it last looked, so that it looks
// at those only; a set that fell further behind than the log keeps is told
// so (it then looks at all of its sockets).
TEST(StateChange, ASetReadsWhichSocketsChanged) {
  using namespace rdmacm::rsocket;
  uint64_t cursor, late;
  ASSERT_GE(state_change_subscribe(&cursor), 0);
  ASSERT_GE(state_change_subscribe(&late), 0);
  std::vector<int> fds;
  EXPECT_TRUE(state_changes_since(&cursor, &fds));
  EXPECT_TRUE(fds.empty());
  announce_state_change(7);
  announce_state_change(9);
  announce_state_change(7);
  EXPECT_TRUE(state_changes_since(&cursor, &fds));
  EXPECT_EQ(fds, (std::vector<int>{7, 9, 7}));
  fds.clear();
  EXPECT_TRUE(state_changes_since(&cursor, &fds));  // read: nothing new
  EXPECT_TRUE(fds.empty());
  for (size_t i = 0; i < kStateChangeLog - 3; ++i) announce_state_change(11);
  fds.clear();
  EXPECT_TRUE(state_changes_since(&late, &fds));  // exactly what the log keeps
  EXPECT_EQ(fds.size(), kStateChangeLog);
  EXPECT_EQ(fds.front(), 7);
  for (size_t i = 0; i <= kStateChangeLog; ++i) announce_state_change(12);
  fds.clear();
  EXPECT_FALSE(state_changes_since(&cursor, &fds));  // one more than it keeps
  EXPECT_TRUE(fds.empty());
  EXPECT_TRUE(state_changes_since(&cursor, &fds));  // caught up
  EXPECT_TRUE(fds.empty());
  state_change_unsubscribe();
  state_change_unsubscribe();
  int a = sleep_begin();  // as the test above: leave the fd empty
  ASSERT_GE(a, 0);
  sleep_end(false);
}

TEST_F(RepollTest, LevelTriggeredReportsWhileReadyWithTheDataUntouched) {
  int e = eventfd(0, EFD_CLOEXEC);
  const uint64_t data = 0xfedcba9876543210;
  ASSERT_EQ(add(e, EPOLLIN, data), 0);
  EXPECT_EQ(wait(0), 0);
  put(e);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(wait(0), 1);
    EXPECT_EQ(got[0].events, EPOLLIN);
    EXPECT_EQ(got[0].data.u64, data);
  }
  take(e);
  EXPECT_EQ(wait(0), 0);
  close(e);
}

TEST_F(RepollTest, EdgeTriggeredReportsEachNewArrivalOnce) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(add(p[0], EPOLLIN | EPOLLET, 7), 0);
  ASSERT_EQ(write(p[1], "a", 1), 1);
  ASSERT_EQ(wait(0), 1);
  EXPECT_EQ(got[0].data.u64, 7u);
  EXPECT_EQ(wait(0), 0);  // still readable, nothing new
  ASSERT_EQ(write(p[1], "b", 1), 1);
  EXPECT_EQ(wait(0), 1);
  EXPECT_EQ(wait(0), 0);
  close(p[0]);
  close(p[1]);
}

TEST_F(RepollTest, OneShotIsDisarmedUntilModified) {
  int e = eventfd(1, EFD_CLOEXEC);
  ASSERT_EQ(add(e, EPOLLIN | EPOLLONESHOT, 1), 0);
  EXPECT_EQ(wait(0), 1);
  EXPECT_EQ(wait(0), 0);
  ASSERT_EQ(mod(e, EPOLLIN | EPOLLONESHOT, 2), 0);
  ASSERT_EQ(wait(0), 1);
  EXPECT_EQ(got[0].data.u64, 2u);
  EXPECT_EQ(wait(0), 0);
  close(e);
}

TEST_F(RepollTest, ModChangesInterestAndDataDelRemoves) {
  int s[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
  ASSERT_EQ(add(s[0], EPOLLIN, 1), 0);
  EXPECT_EQ(wait(0), 0);  // writable, but only IN asked
  ASSERT_EQ(mod(s[0], EPOLLIN | EPOLLOUT, 2), 0);
  ASSERT_EQ(wait(0), 1);
  EXPECT_EQ(got[0].events, EPOLLOUT);
  EXPECT_EQ(got[0].data.u64, 2u);
  ASSERT_EQ(repoll_ctl(ep, EPOLL_CTL_DEL, s[0], nullptr), 0);  // DEL needs no event
  EXPECT_EQ(wait(0), 0);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_DEL, s[0], nullptr), ENOENT);
  ASSERT_EQ(add(s[0], EPOLLOUT, 3), 0);  // and may come back
  EXPECT_EQ(wait(0), 1);
  close(s[0]);
  close(s[1]);
}

TEST_F(RepollTest, ReportsPeerShutdownAndHangUp) {
  int s[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
  ASSERT_EQ(add(s[0], EPOLLIN | EPOLLRDHUP, 1), 0);
  ASSERT_EQ(shutdown(s[1], SHUT_WR), 0);
  ASSERT_EQ(wait(0), 1);
  EXPECT_EQ(got[0].events, EPOLLIN | EPOLLRDHUP);
  close(s[1]);
  ASSERT_EQ(wait(0), 1);
  EXPECT_TRUE(got[0].events & EPOLLHUP);  // reported unasked, as epoll does
  close(s[0]);
}

TEST_F(RepollTest, MaxEventsLimitsOneWaitAndTheRestComeNext) {
  int e[3];
  for (int i = 0; i < 3; ++i) {
    e[i] = eventfd(1, EFD_CLOEXEC);
    ASSERT_EQ(add(e[i], EPOLLIN | EPOLLONESHOT, static_cast<uint64_t>(i)), 0);
  }
  uint64_t seen = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(repoll_wait(ep, got, 1, 0), 1);
    seen |= 1u << got[0].data.u64;
  }
  EXPECT_EQ(seen, 7u);
  EXPECT_EQ(wait(0), 0);
  for (int fd : e) close(fd);
}

// (The upper bounds say how slow a return may be: scaled. The lower ones
// are the timeout and the writer's sleep, both counted from before the wait
// began: never early.)
TEST_F(RepollTest, TimeoutsZeroFiniteAndWokenEarly) {
  int e = eventfd(0, EFD_CLOEXEC);
  ASSERT_EQ(add(e, EPOLLIN, 1), 0);
  auto t = Clock::now();
  EXPECT_EQ(wait(0), 0);
  EXPECT_LT(ms_since(t), test::scaled_ms(50));
  t = Clock::now();
  EXPECT_EQ(wait(150), 0);
  EXPECT_GE(ms_since(t), 150);
  EXPECT_LT(ms_since(t), test::scaled_ms(1500));
  t = Clock::now();  // before the writer's sleep starts
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    put(e);
  });
  EXPECT_EQ(wait(-1), 1);
  EXPECT_GE(ms_since(t), 100);
  writer.join();
  close(e);
}

// repoll_ctl from one thread while another waits: the waiter sees what was
// added after it went to sleep.
TEST_F(RepollTest, AddFromAnotherThreadWakesAWaiter) {
  int e = eventfd(1, EFD_CLOEXEC);
  std::atomic<int> n{-2};
  std::thread waiter([&] { n = repoll_wait(ep, got, 8, test::scaled_ms(5000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(n.load(), -2);  // asleep
  ASSERT_EQ(add(e, EPOLLIN, 42), 0);
  waiter.join();
  ASSERT_EQ(n.load(), 1);
  EXPECT_EQ(got[0].data.u64, 42u);
  close(e);
}

void on_usr1(int) {}

TEST_F(RepollTest, ASignalInterruptsAWait) {
  struct sigaction sa {}, old{};
  sa.sa_handler = on_usr1;  // no SA_RESTART
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  std::atomic<int> ret{-2}, err{0};
  std::atomic<bool> started{false};
  std::thread waiter([&] {
    started = true;
    ret = repoll_wait(ep, got, 8, 10000);
    err = errno;
  });
  // Nothing says when the waiter is asleep in epoll_wait, and a signal that
  // comes before runs the empty handler and is lost: signal it every 10 ms
  // until it returns (in time, the 10 s wait would end with 0, a failure).
  while (!started) std::this_thread::yield();
  while (ret == -2) {
    pthread_kill(waiter.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  waiter.join();
  EXPECT_EQ(ret.load(), -1);
  EXPECT_EQ(err.load(), EINTR);
  sigaction(SIGUSR1, &old, nullptr);
}

// The set is a kernel epoll fd: poll(2) and another epoll set see it
// readable while a member is ready.
TEST_F(RepollTest, NestsInPollAndEpoll) {
  int e = eventfd(0, EFD_CLOEXEC);
  ASSERT_EQ(add(e, EPOLLIN, 1), 0);
  pollfd p{ep, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  int outer = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{EPOLLIN, {.u64 = 9}};
  ASSERT_EQ(epoll_ctl(outer, EPOLL_CTL_ADD, ep, &ev), 0);
  put(e);
  EXPECT_EQ(poll(&p, 1, 1000), 1);
  epoll_event out;
  EXPECT_EQ(epoll_wait(outer, &out, 1, 1000), 1);
  EXPECT_EQ(out.data.u64, 9u);
  p.revents = 0;
  EXPECT_EQ(rpoll(&p, 1, 1000), 1);  // rpoll takes it as well
  close(outer);
  close(e);
}

// A set in a set (repoll in repoll) is reported only while a wait on it
// would report something: not for a listener just added to it with nothing
// to accept (its kernel set then holds a wake-up of ours); then as its
// members become ready. A loop is refused as epoll_ctl refuses it, and a
// closed set leaves the sets it was in.
TEST_F(RepollTest, ASetInASetIsReadyOnlyWhileAWaitOnItWouldReport) {
  int l = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(l, 0) << strerror(errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(rbind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
  ASSERT_EQ(rlisten(l, 4), 0) << strerror(errno);
  int inner = repoll_create(0);
  ASSERT_GE(inner, 0);
  epoll_event ev{EPOLLIN, {.u64 = 7}};
  ASSERT_EQ(repoll_ctl(inner, EPOLL_CTL_ADD, l, &ev), 0) << strerror(errno);
  ASSERT_EQ(add(inner, EPOLLIN, 1), 0) << strerror(errno);
  EXPECT_EQ(wait(0), 0) << "the inner set reported with nothing ready in it";
  ev.data.u64 = 8;
  EXPECT_FAILS_WITH(repoll_ctl(inner, EPOLL_CTL_ADD, ep, &ev), ELOOP);
  int e = eventfd(0, EFD_CLOEXEC);
  ASSERT_EQ(repoll_ctl(inner, EPOLL_CTL_ADD, e, &ev), 0);
  EXPECT_EQ(wait(0), 0);
  put(e);
  ASSERT_EQ(wait(1000), 1);
  EXPECT_EQ(got[0].data.u64, 1u);
  EXPECT_EQ(got[0].events, uint32_t{EPOLLIN});
  epoll_event in[2];
  EXPECT_EQ(repoll_wait(inner, in, 2, 0), 1);  // the look above took nothing from it
  EXPECT_EQ(in[0].data.u64, 8u);
  ASSERT_EQ(rclose(inner), 0);
  EXPECT_EQ(wait(0), 0) << "a closed set still in the set";
  close(e);
  EXPECT_EQ(rclose(l), 0);
}

TEST_F(RepollTest, EveryMisuseHasEpollsErrno) {
  int e = eventfd(0, EFD_CLOEXEC);
  int other = epoll_create1(EPOLL_CLOEXEC);  // a kernel set, not a repoll one
  epoll_event ev{EPOLLIN, {.u64 = 0}};
  epoll_event out[1];
  // repoll_ctl
  EXPECT_FAILS_WITH(repoll_ctl(-1, EPOLL_CTL_ADD, e, &ev), EBADF);
  EXPECT_FAILS_WITH(repoll_ctl(1 << 30, EPOLL_CTL_ADD, e, &ev), EBADF);
  EXPECT_FAILS_WITH(repoll_ctl(e, EPOLL_CTL_ADD, ep, &ev), EINVAL);      // epfd no set
  EXPECT_FAILS_WITH(repoll_ctl(other, EPOLL_CTL_ADD, e, &ev), EINVAL);  // nor this
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev), EINVAL);    // itself
  EXPECT_FAILS_WITH(repoll_ctl(ep, 42, e, &ev), EINVAL);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_ADD, -1, &ev), EBADF);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_ADD, 1 << 30, &ev), EBADF);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_ADD, e, nullptr), EFAULT);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_MOD, e, nullptr), EFAULT);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_MOD, e, &ev), ENOENT);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_DEL, e, nullptr), ENOENT);
  ASSERT_EQ(repoll_ctl(ep, EPOLL_CTL_ADD, e, &ev), 0);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_ADD, e, &ev), EEXIST);
  // A regular file cannot be polled: the kernel's EPERM.
  char path[] = "/tmp/repoll_testXXXXXX";
  int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_ADD, file, &ev), EPERM);
  close(file);
  // repoll_wait
  EXPECT_FAILS_WITH(repoll_wait(ep, out, 0, 0), EINVAL);
  EXPECT_FAILS_WITH(repoll_wait(ep, out, -1, 0), EINVAL);
  EXPECT_FAILS_WITH(repoll_wait(ep, nullptr, 1, 0), EFAULT);
  EXPECT_FAILS_WITH(repoll_wait(-1, out, 1, 0), EBADF);
  EXPECT_FAILS_WITH(repoll_wait(1 << 30, out, 1, 0), EBADF);
  EXPECT_FAILS_WITH(repoll_wait(e, out, 1, 0), EINVAL);
  EXPECT_FAILS_WITH(repoll_wait(other, out, 1, 0), EINVAL);
  close(other);
  close(e);
}

// An fd closed without EPOLL_CTL_DEL is gone from the set, as from a kernel
// one: its number can be added again.
TEST_F(RepollTest, AClosedOrdinaryFdLeavesTheSet) {
  int e = eventfd(1, EFD_CLOEXEC);
  ASSERT_EQ(add(e, EPOLLIN, 1), 0);
  close(e);
  EXPECT_EQ(wait(0), 0);
  int again = eventfd(1, EFD_CLOEXEC);
  ASSERT_EQ(again, e);
  EXPECT_EQ(add(again, EPOLLIN, 2), 0) << strerror(errno);
  ASSERT_EQ(wait(0), 1);
  EXPECT_EQ(got[0].data.u64, 2u);
  close(again);
}

TEST_F(RepollTest, RsocketsMixWithOrdinaryFdsAndLeaveTheSetOnRclose) {
  int s = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0) << strerror(errno);
  int e = eventfd(1, EFD_CLOEXEC);
  ASSERT_EQ(add(s, EPOLLIN | EPOLLOUT, 1), 0);
  EXPECT_FAILS_WITH(add(s, EPOLLIN, 1), EEXIST);
  ASSERT_EQ(add(e, EPOLLIN, 2), 0);
  // The eventfd, and the unconnected rsocket: hung up and writable, as
  // epoll says of a TCP socket that never connected.
  ASSERT_EQ(wait(0), 2);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(got[i].events, got[i].data.u64 == 1 ? uint32_t{EPOLLOUT | EPOLLHUP} : uint32_t{EPOLLIN})
        << "member " << got[i].data.u64;
  EXPECT_FAILS_WITH(mod(s, EPOLLIN | EPOLLEXCLUSIVE, 1), EINVAL);
  ASSERT_EQ(mod(s, EPOLLIN, 3), 0);
  ASSERT_EQ(rclose(s), 0);
  EXPECT_EQ(wait(0), 1);  // no crash: the socket has left the set
  EXPECT_FAILS_WITH(repoll_ctl(ep, EPOLL_CTL_DEL, s, nullptr), EBADF);  // as a closed fd
  // A new rsocket, most likely on the same fd number, is a new member.
  int s2 = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s2, 0);
  EXPECT_EQ(add(s2, EPOLLIN, 4), 0) << strerror(errno);
  EXPECT_EQ(repoll_ctl(ep, EPOLL_CTL_DEL, s2, nullptr), 0);
  EXPECT_EQ(rclose(s2), 0);
  close(e);
}

// Writable before its first send, as a UDP socket (poll_state's answer).
TEST_F(RepollTest, ADatagramRsocketIsWritableBeforeItsFirstSend) {
  int d = ::rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(d, 0) << strerror(errno);
  ASSERT_EQ(add(d, EPOLLIN | EPOLLOUT, 5), 0);
  ASSERT_EQ(wait(0), 1);
  EXPECT_EQ(got[0].events, EPOLLOUT);
  EXPECT_EQ(got[0].data.u64, 5u);
  ASSERT_EQ(mod(d, EPOLLIN, 6), 0);
  EXPECT_EQ(wait(0), 0);
  EXPECT_EQ(rclose(d), 0);
}

// repoll_ctl, and rclose of members, from one thread while another waits:
// the waiter never fails, crashes or reports what it was not given.
TEST_F(RepollTest, ControlWhileAnotherThreadWaits) {
  int ready = eventfd(1, EFD_CLOEXEC);
  ASSERT_EQ(add(ready, EPOLLIN, 99), 0);
  std::atomic<bool> stop{false};
  std::atomic<int> waits{0}, bad{0};
  std::thread waiter([&] {
    epoll_event ev[4];
    while (!stop) {
      int n = repoll_wait(ep, ev, 4, 10);
      if (n < 1) ++bad;  // the eventfd is always ready
      for (int i = 0; i < n; ++i)
        if (ev[i].data.u64 != 99 && ev[i].data.u64 != 1 && ev[i].data.u64 != 2) ++bad;
      ++waits;
    }
  });
  while (!waits) std::this_thread::yield();
  for (int i = 0; i < 200 && !HasFailure(); ++i) {
    if (i % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    int e = eventfd(1, EFD_CLOEXEC);
    int s = ::rsocket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(add(e, EPOLLIN, 1), 0);
    EXPECT_EQ(add(s, EPOLLIN | EPOLLOUT, 2), 0);
    EXPECT_EQ(mod(e, EPOLLIN | EPOLLET, 1), 0);
    EXPECT_EQ(repoll_ctl(ep, EPOLL_CTL_DEL, e, nullptr), 0);
    close(e);
    EXPECT_EQ(rclose(s), 0);  // leaves the set while the waiter may be looking at it
  }
  stop = true;
  waiter.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(waits.load(), 1);
  close(ready);
}

// rclose(epfd) frees a set with members in it (rdma-core says EBUSY).
TEST_F(RepollTest, RcloseFreesASetWithMembers) {
  int e = eventfd(0, EFD_CLOEXEC);
  int s = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  ASSERT_EQ(add(e, EPOLLIN, 1), 0);
  ASSERT_EQ(add(s, EPOLLIN, 2), 0);
  EXPECT_EQ(rclose(ep), 0);
  EXPECT_FAILS_WITH(repoll_wait(ep, got, 8, 0), EBADF);
  ep = -1;
  EXPECT_EQ(rclose(s), 0);  // the socket is fine
  close(e);
}

}  // namespace
}  // namespace rdmacm::testing
