// Stream rsockets answering as the kernel's TCP does (the reference for
// everything a socket program can observe), through the public r* calls on
// the device: a send after one's own shutdown, a reader woken by shutdown,
// reads of no bytes, readiness after one's own shutdowns, message vectors
// past IOV_MAX, MSG_MORE, SO_RCVTIMEO, an accept woken by shutdown. Each expectation was measured on the kernel's TCP
// first (a plain-socket program over loopback, Linux 6.18). Run against ours
// and rdma-core's library (RDMACM_REFERENCE): where rdma-core 44 answers
// otherwise, the test skips there and says what rdma-core does.
#include <gtest/gtest.h>
#include <rdma/rsocket.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "../common/time_scale.h"
#include "rsocket_pair.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using namespace std::chrono_literals;
using test::scaled;

// Whether SIGPIPE is pending for this thread (blocked around the calls, so a
// signal raised by them stays pending instead of killing the test).
struct SigpipeWatch {
  sigset_t pipe, old;
  SigpipeWatch() {
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old);
  }
  bool raised() {
    sigset_t pending;
    sigpending(&pending);
    if (!sigismember(&pending, SIGPIPE)) return false;
    timespec none{0, 0};
    sigtimedwait(&pipe, nullptr, &none);  // take it
    return true;
  }
  ~SigpipeWatch() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
};

// Until thread tid sleeps (its state in /proc is S), for at most 5 s scaled:
// a reader past its spin, asleep on the CQ. (A reader that never got there
// is no failure: what it returns must be the same.)
void wait_asleep(pid_t tid) {
  std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  auto until = std::chrono::steady_clock::now() + scaled(5s);
  while (std::chrono::steady_clock::now() < until) {
    FILE* f = std::fopen(path.c_str(), "re");
    if (!f) return;  // the thread is gone: it returned
    char stat[512] = {};
    bool read = std::fgets(stat, sizeof(stat), f) != nullptr;
    std::fclose(f);
    if (!read) return;
    const char* at = std::strrchr(stat, ')');
    if (at && at[1] == ' ' && at[2] == 'S') return;
    std::this_thread::yield();
  }
}

// A read on `fd` in a thread of its own: its result if it returned within
// `bound`, else (after a byte from `peer` unblocked it) -2.
template <class Read>
ssize_t read_within(std::chrono::milliseconds bound, int peer, Read read,
                    const std::function<void()>& meanwhile = {}) {
  std::promise<pid_t> tid;
  auto done = std::async(std::launch::async, [&] {
    tid.set_value(static_cast<pid_t>(syscall(SYS_gettid)));
    return read();
  });
  wait_asleep(tid.get_future().get());
  if (meanwhile) meanwhile();
  if (done.wait_for(bound) == std::future_status::ready) return done.get();
  rsend(peer, "!", 1, 0);
  done.wait();
  return -2;
}

// TCP: -1 EPIPE once one's own writing is shut, whatever the size, through
// every send call; the r* calls raise no SIGPIPE (the preload does). Reading
// alone shut leaves sending as it was.
TEST(RsocketAsTcp, SendAfterOwnShutdownOfWritingFailsWithEpipe) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 sends after SHUT_WR and SHUT_RDWR";
  for (int how : {SHUT_WR, SHUT_RDWR}) {
    Pair p(7650 + how);
    ASSERT_EQ(rshutdown(p.client, how), 0) << strerror(errno);
    SigpipeWatch watch;
    char c = 'x';
    iovec iov{&c, 1};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    errno = 0;
    EXPECT_EQ(rsend(p.client, &c, 1, 0), -1);
    EXPECT_EQ(errno, EPIPE) << "how " << how;
    errno = 0;
    EXPECT_EQ(rsend(p.client, &c, 0, 0), -1);
    EXPECT_EQ(errno, EPIPE) << "no bytes, how " << how;
    errno = 0;
    EXPECT_EQ(rwrite(p.client, &c, 1), -1);
    EXPECT_EQ(errno, EPIPE);
    errno = 0;
    EXPECT_EQ(rwritev(p.client, &iov, 1), -1);
    EXPECT_EQ(errno, EPIPE);
    errno = 0;
    EXPECT_EQ(rsendmsg(p.client, &m, MSG_NOSIGNAL), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_FALSE(watch.raised()) << "the r* calls raise no SIGPIPE";
  }
  Pair p(7653);
  ASSERT_EQ(rshutdown(p.client, SHUT_RD), 0) << strerror(errno);
  EXPECT_EQ(rsend(p.client, "y", 1, 0), 1) << strerror(errno);
  char c = 0;
  EXPECT_EQ(rrecv(p.server, &c, 1, MSG_WAITALL), 1);
  EXPECT_EQ(c, 'y');
}

// TCP: shutdown(SHUT_RD) wakes a thread asleep in recv on that socket, which
// returns 0 (measured: at once); later receives return 0 at once.
TEST(RsocketAsTcp, ShutdownOfReadingWakesABlockedReader) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 leaves the reader asleep";
  for (int how : {SHUT_RD, SHUT_RDWR}) {
    Pair p(7654 + how);
    char buf[8];
    ssize_t got = read_within(
        scaled(5000ms), p.client, [&] { return rrecv(p.server, buf, sizeof(buf), 0); },
        [&] { EXPECT_EQ(rshutdown(p.server, how), 0) << strerror(errno); });
    EXPECT_EQ(got, 0) << "-2: still asleep after the shutdown";
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(rrecv(p.server, buf, sizeof(buf), 0), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, scaled(1s));
  }
}

// TCP: what arrived before shutdown(SHUT_RD) is still read, then 0.
TEST(RsocketAsTcp, DataBufferedBeforeShutdownOfReadingIsReadThenEndOfFile) {
  Pair p(7657);
  ASSERT_EQ(rsend(p.client, "hello", 5, 0), 5);
  pollfd pfd{p.server, POLLIN, 0};
  ASSERT_EQ(rpoll(&pfd, 1, test::scaled_ms(5000)), 1);
  ASSERT_EQ(rshutdown(p.server, SHUT_RD), 0) << strerror(errno);
  char buf[8] = {};
  EXPECT_EQ(rrecv(p.server, buf, sizeof(buf), 0), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(rrecv(p.server, buf, sizeof(buf), 0), 0);
}

// TCP: read(2) and readv(2) of no bytes return 0 at once (sock_read_iter);
// recv(2) of no bytes waits for data as any receive does (measured: a
// blocking one returns 0 when the peer sends, a non-blocking one EAGAIN).
TEST(RsocketAsTcp, AReadOfNoBytesReturnsAtOnce) {
  if (reference()) GTEST_SKIP() << "rdma-core 44's rread of no bytes waits for data";
  Pair p(7658);
  char buf[4];
  EXPECT_EQ(read_within(scaled(5000ms), p.client, [&] { return rread(p.server, buf, 0); }), 0);
  iovec none{buf, 0};
  EXPECT_EQ(read_within(scaled(5000ms), p.client, [&] { return rreadv(p.server, &none, 1); }), 0);
  errno = 0;
  EXPECT_EQ(rrecv(p.server, buf, 0, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  // Nothing was taken: the byte each rescue sent (none, if all went well).
  EXPECT_EQ(rrecv(p.server, buf, sizeof(buf), MSG_DONTWAIT), -1);
}

// TCP (tcp_poll): after SHUT_RD, POLLIN and POLLRDHUP (a read returns 0);
// after SHUT_WR, POLLOUT only; after SHUT_RDWR, POLLHUP besides, even when
// not asked for. Writable stays as it was: a send then says EPIPE.
TEST(RsocketAsTcp, PollAfterOwnShutdownsAnswersAsTcpPoll) {
  if (reference()) GTEST_SKIP() << "rdma-core 44: POLLIN after SHUT_WR, no POLLRDHUP after SHUT_RDWR";
  const short asked = POLLIN | POLLOUT | POLLRDHUP;
  struct Case {
    int how;
    short revents;
  } cases[] = {{SHUT_RD, POLLIN | POLLOUT | POLLRDHUP},
               {SHUT_WR, POLLOUT},
               {SHUT_RDWR, POLLIN | POLLOUT | POLLRDHUP | POLLHUP}};
  for (const Case& c : cases) {
    Pair p(7659 + c.how);
    ASSERT_EQ(rshutdown(p.client, c.how), 0) << strerror(errno);
    pollfd pfd{p.client, asked, 0};
    EXPECT_GE(rpoll(&pfd, 1, 0), 0);
    EXPECT_EQ(pfd.revents, c.revents) << "how " << c.how << ": " << std::hex << pfd.revents;
    pfd = {p.client, 0, 0};
    EXPECT_GE(rpoll(&pfd, 1, 0), 0);
    EXPECT_EQ(pfd.revents, c.revents & POLLHUP) << "how " << c.how << ", nothing asked";
  }
}

// TCP: a message of more than UIO_MAXIOV (1024) buffers is EMSGSIZE
// (msg_iovlen is a size_t: rdma-core 44 casts it to int, so 1 << 32 buffers
// read as none: end-of-file); readv(2) and writev(2) past it, EINVAL.
TEST(RsocketAsTcp, MessagesOfMoreBuffersThanIovMaxAreTooLong) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 casts msg_iovlen to int and reads past the vector";
  Pair p(7662);
  ASSERT_EQ(rsend(p.client, "z", 1, 0), 1);
  char c = 0;
  iovec iov{&c, 1};
  for (size_t count : {size_t{IOV_MAX} + 1, size_t{1} << 32, (size_t{1} << 31) + 1, SIZE_MAX}) {
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = count;
    errno = 0;
    EXPECT_EQ(rrecvmsg(p.server, &m, MSG_DONTWAIT), -1) << count;
    EXPECT_EQ(errno, EMSGSIZE) << count;
    errno = 0;
    EXPECT_EQ(rsendmsg(p.client, &m, MSG_DONTWAIT), -1) << count;
    EXPECT_EQ(errno, EMSGSIZE) << count;
  }
  errno = 0;
  EXPECT_EQ(rreadv(p.server, &iov, IOV_MAX + 1), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rwritev(p.client, &iov, IOV_MAX + 1), -1);
  EXPECT_EQ(errno, EINVAL);
  // Nothing was read or sent: the byte is still there, alone.
  EXPECT_EQ(rrecv(p.server, &c, 1, MSG_WAITALL), 1);
  EXPECT_EQ(c, 'z');
  EXPECT_EQ(rrecv(p.server, &c, 1, MSG_DONTWAIT), -1);
}

// MSG_MORE is a hint: the send is taken and its bytes arrive (TCP holds them
// back for up to 200 ms; ours sends them at once: rsocket(7)).
TEST(RsocketAsTcp, ASendWithMsgMoreIsTaken) {
  Pair p(7663);
  EXPECT_EQ(rsend(p.client, "ab", 2, MSG_MORE), 2) << strerror(errno);
  EXPECT_EQ(rsend(p.client, "c", 1, 0), 1) << strerror(errno);
  char buf[4] = {};
  EXPECT_EQ(recv_all(p.server, buf, 3), 3);
  EXPECT_EQ(std::string(buf, 3), "abc");
}

// TCP: with SO_RCVTIMEO set, a blocking recv with nothing to read returns
// -1 EAGAIN once the time passed (measured: 200 ms, then EAGAIN);
// getsockopt gives back the time set. SO_SNDTIMEO reads back the same way.
TEST(RsocketAsTcp, AReceiveTimeoutEndsABlockedReceiveWithEagain) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 refuses SO_RCVTIMEO (ENOTSUP)";
  Pair p(7596);
  timeval tv{0, 200000};
  ASSERT_EQ(rsetsockopt(p.server, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0) << strerror(errno);
  timeval got{};
  socklen_t len = sizeof(got);
  ASSERT_EQ(rgetsockopt(p.server, SOL_SOCKET, SO_RCVTIMEO, &got, &len), 0) << strerror(errno);
  EXPECT_EQ(len, sizeof(got));
  EXPECT_EQ(got.tv_sec, 0);
  EXPECT_EQ(got.tv_usec, 200000);
  timeval snd{1, 500000};
  ASSERT_EQ(rsetsockopt(p.server, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd)), 0);
  ASSERT_EQ(rgetsockopt(p.server, SOL_SOCKET, SO_SNDTIMEO, &got, &len), 0);
  EXPECT_EQ(got.tv_sec, 1);
  EXPECT_EQ(got.tv_usec, 500000);
  timeval bad{0, 1000000};
  EXPECT_EQ(rsetsockopt(p.server, SOL_SOCKET, SO_RCVTIMEO, &bad, sizeof(bad)), -1);
  EXPECT_EQ(errno, EDOM);
  char buf[8];
  auto t0 = std::chrono::steady_clock::now();
  ssize_t n = read_within(scaled(5000ms), p.client,
                          [&] { return rrecv(p.server, buf, sizeof(buf), 0) < 0 ? -errno : 0; });
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(n, -EAGAIN) << "-2: still asleep after the timeout";
  EXPECT_GE(took, 190ms);
  // Data that comes within the time is read as ever.
  EXPECT_EQ(rsend(p.client, "ab", 2, 0), 2);
  EXPECT_EQ(rrecv(p.server, buf, sizeof(buf), 0), 2);
}

// TCP: shutdown(SHUT_RDWR) of a listening socket wakes a thread asleep in
// accept, which returns -1 EINVAL; later accepts are EINVAL at once, and
// the socket still closes (measured on the kernel's TCP).
TEST(RsocketAsTcp, ShutdownOfAListenerWakesABlockedAccept) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 leaves the accept asleep";
  int l = listener(7597);
  std::promise<pid_t> tid;
  auto done = std::async(std::launch::async, [&] {
    tid.set_value(static_cast<pid_t>(syscall(SYS_gettid)));
    return raccept(l, nullptr, nullptr) < 0 ? -errno : 0;
  });
  wait_asleep(tid.get_future().get());
  EXPECT_EQ(rshutdown(l, SHUT_RDWR), 0) << strerror(errno);
  if (done.wait_for(scaled(5000ms)) != std::future_status::ready) {
    ADD_FAILURE() << "the accept still sleeps after the shutdown";
    int c = rsocket(AF_INET, SOCK_STREAM, 0);  // a connection wakes it
    sockaddr_in a = device_addr(7597);
    rconnect(c, sa(&a), sizeof(a));
    done.wait();
    rclose(c);
  } else {
    EXPECT_EQ(done.get(), -EINVAL);
  }
  errno = 0;
  EXPECT_EQ(raccept(l, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rclose(l), 0);
}

// TCP: SO_RCVTIMEO bounds a blocking accept as a receive (-1 EAGAIN at the
// bound); a connection that comes within it is accepted as ever. (The
// preload's listeners wait on their own: rxe.conformance accept_rcvtimeo.)
TEST(RsocketAsTcp, AReceiveTimeoutEndsABlockedAcceptWithEagain) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 refuses SO_RCVTIMEO (ENOTSUP)";
  constexpr uint16_t kPort = 7599;
  int l = listener(kPort);
  timeval tv{0, 200000};
  ASSERT_EQ(rsetsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0) << strerror(errno);
  auto t0 = std::chrono::steady_clock::now();
  auto done = std::async(std::launch::async, [&] { return raccept(l, nullptr, nullptr) < 0 ? -errno : 0; });
  sockaddr_in a = device_addr(kPort);
  int c = rsocket(AF_INET, SOCK_STREAM, 0);
  bool connected = false;
  if (done.wait_for(scaled(5000ms)) != std::future_status::ready) {
    ADD_FAILURE() << "the accept still sleeps after its timeout";
    connected = rconnect(c, sa(&a), sizeof(a)) == 0;  // a connection wakes it
  }
  EXPECT_EQ(done.get(), -EAGAIN);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 190ms);
  if (!connected) {
    ASSERT_EQ(rconnect(c, sa(&a), sizeof(a)), 0) << strerror(errno);
  }
  int s = raccept(l, nullptr, nullptr);
  EXPECT_GE(s, 0) << strerror(errno);
  for (int fd : {s, c, l}) rclose(fd);
}

// A blocking connect under way in one thread is, to the others, the kernel's
// SYN_SENT: poll says not ready (not hung up), a non-blocking receive EAGAIN
// (not ENOTCONN), a second connect EALREADY, a blocking receive waits for
// the connection and its first byte (within SO_RCVTIMEO). A backlog of 0
// holds one connection for raccept (as TCP's), so a second client's connect
// waits until the first is accepted. (Left looking unconnected, a CPython server thread
// reading its client's socket got ENOTCONN under load.)
TEST(RsocketAsTcp, AConnectUnderWayInAnotherThreadIsOpeningToTheOthers) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 crashes here (SIGSEGV, measured on rxe)";
  constexpr uint16_t kPort = 7598;
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = device_addr(kPort);
  ASSERT_EQ(rbind(l, sa(&a), sizeof(a)), 0) << strerror(errno);
  ASSERT_EQ(rlisten(l, 0), 0) << strerror(errno);
  auto dial = [&](int fd) { return rconnect(fd, sa(&a), sizeof(a)) ? -errno : 0; };
  int first = rsocket(AF_INET, SOCK_STREAM, 0), second = rsocket(AF_INET, SOCK_STREAM, 0);
  auto filled = std::async(std::launch::async, dial, first);
  filled.wait_for(scaled(2000ms));  // ours: connected, the backlog full; rdma-core's: waits
  auto connecting = std::async(std::launch::async, dial, second);

  // Until the connect is under way (the thread may not have started it).
  pollfd p{second, POLLIN | POLLOUT, 0};
  auto until = std::chrono::steady_clock::now() + scaled(5s);
  while (rpoll(&p, 1, 0) != 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_EQ(p.revents, 0) << "a connect under way polled as never connected";
  EXPECT_NE(connecting.wait_for(0ms), std::future_status::ready) << "the second connect did not wait";
  char b = 0;
  errno = 0;
  EXPECT_EQ(rrecv(second, &b, 1, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN) << strerror(errno);
  EXPECT_EQ(rpoll(&p, 1, 300), 0);
  errno = 0;
  EXPECT_EQ(rconnect(second, sa(&a), sizeof(a)), -1);
  EXPECT_EQ(errno, EALREADY) << strerror(errno);
  // A blocking receive waits for the connection within SO_RCVTIMEO.
  timeval tv{0, 200000};
  ASSERT_EQ(rsetsockopt(second, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
  auto t0 = std::chrono::steady_clock::now();
  auto timed = std::async(std::launch::async, [&] { return rrecv(second, &b, 1, 0) < 0 ? -errno : 0; });
  ASSERT_EQ(timed.wait_for(scaled(5s)), std::future_status::ready) << "a receive waited past its timeout";
  EXPECT_EQ(timed.get(), -EAGAIN);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 190ms);
  tv = {0, 0};  // for ever again, for the reader
  ASSERT_EQ(rsetsockopt(second, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
  auto reader = std::async(std::launch::async, [&] {
    char c = 0;
    ssize_t n = rrecv(second, &c, 1, 0);
    return n == 1 ? c : n < 0 ? -errno : 0;
  });

  // Each accepted end sends its own byte: the reader gets its peer's.
  int ends[2];
  for (int& s : ends) {
    s = raccept(l, nullptr, nullptr);
    ASSERT_GE(s, 0) << strerror(errno);
  }
  for (int s : ends) ASSERT_EQ(rsend(s, "x", 1, 0), 1) << strerror(errno);
  ASSERT_EQ(connecting.wait_for(scaled(10s)), std::future_status::ready);
  EXPECT_EQ(connecting.get(), 0);
  ASSERT_EQ(reader.wait_for(scaled(10s)), std::future_status::ready);
  EXPECT_EQ(reader.get(), 'x');
  EXPECT_EQ(filled.get(), 0);
  for (int fd : {ends[0], ends[1], first, second, l}) rclose(fd);
}

}  // namespace
}  // namespace rdmacm::rxe
