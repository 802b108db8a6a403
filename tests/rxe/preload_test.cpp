// librspreload.so under a program that knows nothing of RDMA: this binary
// uses only libc's socket calls and runs with LD_PRELOAD set to our preload
// (rxe.basics), so each test proves what an ordinary program sees: bytes
// cross rxe0, descriptors behave as the kernel's (fstat, dup, dup2, close,
// F_GETFL, accept4 flags, select, TCP options), and the fallback to TCP.
// The fork tests run in a second invocation with RDMAV_FORK_SAFE=1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstring>
#include <future>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/time_scale.h"
#include "preload_helpers.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using namespace std::chrono_literals;

int listening(uint16_t port, const char* ip = nullptr) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(l, 0) << strerror(errno);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = device_addr(port);
  if (ip) inet_pton(AF_INET, ip, &a.sin_addr);
  EXPECT_EQ(bind(l, sa(&a), sizeof a), 0) << strerror(errno);
  EXPECT_EQ(listen(l, 4), 0) << strerror(errno);
  return l;
}

struct Pair {
  int server = -1, client = -1;
  explicit Pair(uint16_t port, int accept_flags = 0) {
    int l = listening(port);
    std::thread accepter([&] { server = accept4(l, nullptr, nullptr, accept_flags); });
    client = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = device_addr(port);
    EXPECT_EQ(connect(client, sa(&a), sizeof a), 0) << strerror(errno);
    accepter.join();
    EXPECT_GE(server, 0) << strerror(errno);
    close(l);
  }
  ~Pair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
};

TEST(Preload, AMebibyteCrossesTheDeviceThroughPlainSocketCalls) {
  if (fork_safe()) GTEST_SKIP();
  long before = sent_packets();
  Pair p(7601);
  auto out = pattern(1 << 20);
  std::vector<char> in(out.size());
  std::thread reader([&] { EXPECT_EQ(read_all(p.server, in.data(), in.size()), (ssize_t)in.size()); });
  write_all(p.client, out.data(), out.size());
  reader.join();
  EXPECT_EQ(in, out);
  EXPECT_GE(sent_packets() - before, 256) << "the bytes did not cross rxe0";
}

TEST(Preload, DescriptorsLookLikeTcpSockets) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7602);
  struct stat st;
  ASSERT_EQ(fstat(p.client, &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  int type = 0;
  socklen_t len = sizeof type;
  ASSERT_EQ(getsockopt(p.client, SOL_SOCKET, SO_TYPE, &type, &len), 0) << strerror(errno);
  EXPECT_EQ(type, SOCK_STREAM);
  tcp_info info{};
  len = sizeof info;
  ASSERT_EQ(getsockopt(p.client, IPPROTO_TCP, TCP_INFO, &info, &len), 0) << strerror(errno);
  EXPECT_EQ(info.tcpi_state, TCP_ESTABLISHED);
  char cc[16] = {};
  len = sizeof cc;
  EXPECT_EQ(getsockopt(p.client, IPPROTO_TCP, TCP_CONGESTION, cc, &len), 0) << strerror(errno);
  EXPECT_GT(strlen(cc), 0u);
  int one = 1;
  EXPECT_EQ(setsockopt(p.client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
  EXPECT_EQ(setsockopt(p.client, IPPROTO_IP, IP_TOS, &one, sizeof one), 0) << strerror(errno);
  sockaddr_in peer{};
  len = sizeof peer;
  ASSERT_EQ(getpeername(p.client, sa(&peer), &len), 0);
  EXPECT_EQ(ntohs(peer.sin_port), 7602);
  // O_NONBLOCK reaches the rsocket and reads back.
  int flags = fcntl(p.client, F_GETFL);
  ASSERT_EQ(fcntl(p.client, F_SETFL, flags | O_NONBLOCK), 0);
  EXPECT_TRUE(fcntl(p.client, F_GETFL) & O_NONBLOCK);
  char c;
  EXPECT_EQ(read(p.client, &c, 1), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST(Preload, Accept4FlagsApplyToTheAcceptedSocket) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7603, SOCK_NONBLOCK | SOCK_CLOEXEC);
  EXPECT_TRUE(fcntl(p.server, F_GETFD) & FD_CLOEXEC);
  EXPECT_TRUE(fcntl(p.server, F_GETFL) & O_NONBLOCK);
  char c;
  EXPECT_EQ(recv(p.server, &c, 1, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST(Preload, ADupKeepsTheConnectionUntilTheLastDescriptorCloses) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7604);
  int copy = dup(p.client);
  ASSERT_GE(copy, 0);
  close(p.client);
  p.client = -1;
  write_all(copy, "abc", 3);
  char buf[4] = {};
  ASSERT_EQ(read_all(p.server, buf, 3), 3);
  EXPECT_STREQ(buf, "abc");
  int third = fcntl(copy, F_DUPFD_CLOEXEC, 100);
  ASSERT_GE(third, 100);
  close(copy);
  write_all(third, "d", 1);
  ASSERT_EQ(read_all(p.server, buf, 1), 1);
  EXPECT_EQ(buf[0], 'd');
  close(third);
  EXPECT_EQ(read(p.server, buf, 1), 0) << "the last close did not end the connection";
}

TEST(Preload, Dup2OntoAnRsocketClosesItAndTheNumberIsThePipe) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7605);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(dup2(fds[1], p.client), p.client);
  char c = 0;
  EXPECT_EQ(read(p.server, &c, 1), 0) << "dup2 did not close the rsocket";
  ASSERT_EQ(write(p.client, "x", 1), 1);  // now the pipe's write end
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  close(fds[0]);
  close(fds[1]);
}

TEST(Preload, ANumberClosedBehindOurBackIsForgottenWhenReused) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7606);
  int fd = p.client;
  syscall(SYS_close, fd);  // not through close(): the map still holds fd
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  int again = fcntl(fds[1], F_DUPFD, fd);  // the kernel hands the number out again
  ASSERT_EQ(again, fd);
  char c = 0;
  EXPECT_EQ(read(p.server, &c, 1), 0) << "the stale rsocket was not closed on reuse";
  ASSERT_EQ(write(again, "w", 1), 1) << "the number still leads to the old rsocket";
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'w');
  close(fds[0]);
  close(fds[1]);
  p.client = again;
}

TEST(Preload, SelectAndPollSeeDataAndEndOfFileOnRsocketsAndPipesTogether) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7607);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  fd_set rd, ex;
  FD_ZERO(&rd);
  FD_ZERO(&ex);
  FD_SET(p.server, &rd);
  FD_SET(fds[0], &rd);
  FD_SET(p.server, &ex);
  timeval tv{0, 100000};
  EXPECT_EQ(select(FD_SETSIZE, &rd, nullptr, &ex, &tv), 0);
  write_all(p.client, "hi", 2);
  FD_ZERO(&rd);
  FD_SET(p.server, &rd);
  FD_SET(fds[0], &rd);
  tv = {test::scaled_ms(5000) / 1000, 0};
  ASSERT_EQ(select(FD_SETSIZE, &rd, nullptr, nullptr, &tv), 1);
  EXPECT_TRUE(FD_ISSET(p.server, &rd));
  EXPECT_FALSE(FD_ISSET(fds[0], &rd));
  char buf[2];
  ASSERT_EQ(read_all(p.server, buf, 2), 2);
  pollfd pf[2] = {{p.server, POLLIN, 0}, {fds[0], POLLIN, 0}};
  ASSERT_EQ(write(fds[1], "p", 1), 1);
  ASSERT_EQ(poll(pf, 2, test::scaled_ms(5000)), 1);
  EXPECT_EQ(pf[0].revents, 0);
  EXPECT_TRUE(pf[1].revents & POLLIN);
  close(p.client);
  p.client = -1;
  FD_ZERO(&rd);
  FD_ZERO(&ex);
  FD_SET(p.server, &rd);
  FD_SET(p.server, &ex);
  tv = {test::scaled_ms(5000) / 1000, 0};
  ASSERT_EQ(select(p.server + 1, &rd, nullptr, &ex, &tv), 1);
  EXPECT_TRUE(FD_ISSET(p.server, &rd));
  EXPECT_FALSE(FD_ISSET(p.server, &ex)) << "end of file is not an exception";
  EXPECT_EQ(read(p.server, buf, 1), 0);
  close(fds[0]);
  close(fds[1]);
}

TEST(Preload, EpollWatchesRsocketsAndPipesTogether) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7608);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 1;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p.server, &ev), 0) << strerror(errno);
  ev.data.u64 = 2;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev), 0) << strerror(errno);
  epoll_event got[2];
  EXPECT_EQ(epoll_wait(ep, got, 2, 50), 0);
  std::thread later([&] {
    usleep(100000);
    write_all(p.client, "e", 1);
  });
  ASSERT_EQ(epoll_wait(ep, got, 2, test::scaled_ms(5000)), 1) << strerror(errno);
  EXPECT_EQ(got[0].data.u64, 1u);
  later.join();
  ASSERT_EQ(write(fds[1], "p", 1), 1);
  EXPECT_EQ(epoll_wait(ep, got, 2, test::scaled_ms(5000)), 2);
  close(ep);
  close(fds[0]);
  close(fds[1]);
}

TEST(Preload, SendtoWithAnAddressAndSendfileOnAConnectedStream) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7609);
  sockaddr_in somewhere = device_addr(9);
  ASSERT_EQ(sendto(p.client, "to", 2, 0, sa(&somewhere), sizeof somewhere), 2) << strerror(errno);
  char buf[2];
  ASSERT_EQ(read_all(p.server, buf, 2), 2);
  char path[] = "/tmp/preload_sendfileXXXXXX";
  int f = mkstemp(path);
  ASSERT_GE(f, 0);
  unlink(path);
  auto data = pattern(300000);
  ASSERT_EQ(write(f, data.data(), data.size()), (ssize_t)data.size());
  std::vector<char> in(data.size());
  std::thread reader([&] { EXPECT_EQ(read_all(p.server, in.data(), in.size()), (ssize_t)in.size()); });
  off_t off = 0;
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = sendfile(p.client, f, &off, data.size() - sent);
    ASSERT_GT(n, 0) << strerror(errno);
    sent += static_cast<size_t>(n);
  }
  reader.join();
  EXPECT_EQ(off, (off_t)data.size());
  EXPECT_EQ(in, data);
  close(f);
}

TEST(Preload, NoRdmaListenerFallsBackToTcp) {
  if (fork_safe()) GTEST_SKIP();
  // A kernel TCP listener the preload cannot see (raw system calls).
  int l = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0));
  ASSERT_GE(l, 0);
  int one = 1;
  syscall(SYS_setsockopt, l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = device_addr(7610);
  ASSERT_EQ(syscall(SYS_bind, l, sa(&a), sizeof a), 0);
  ASSERT_EQ(syscall(SYS_listen, l, 1), 0);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(c, sa(&a), sizeof a), 0) << strerror(errno);
  int s = static_cast<int>(syscall(SYS_accept4, l, nullptr, nullptr, 0));
  ASSERT_GE(s, 0);
  ASSERT_EQ(write(c, "tcp", 3), 3);
  char buf[4] = {};
  ASSERT_EQ(syscall(SYS_read, s, buf, 3), 3);
  EXPECT_STREQ(buf, "tcp");
  close(c);
  syscall(SYS_close, s);
  syscall(SYS_close, l);
}

// As TCP (measured on the kernel's): a send after one's own shutdown of
// writing fails with EPIPE and raises SIGPIPE at the sending thread, unless
// the call says MSG_NOSIGNAL; write, writev and sendfile, which cannot say
// it, raise it.
std::atomic<int> sigpipes{0};
std::atomic<pid_t> sigpipe_tid{0};

TEST(Preload, ASendAfterShutdownOfWritingRaisesSigpipeUnlessMsgNosignal) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7614);
  ASSERT_EQ(shutdown(p.client, SHUT_WR), 0) << strerror(errno);
  struct sigaction count {}, old{};
  count.sa_handler = [](int) {
    sigpipes++;
    sigpipe_tid = static_cast<pid_t>(syscall(SYS_gettid));
  };
  sigaction(SIGPIPE, &count, &old);
  sigpipes = 0;
  errno = 0;
  EXPECT_EQ(send(p.client, "a", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(sigpipes, 1);
  EXPECT_EQ(sigpipe_tid, static_cast<pid_t>(syscall(SYS_gettid))) << "not the sending thread";
  errno = 0;
  EXPECT_EQ(send(p.client, "a", 1, MSG_NOSIGNAL), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(sigpipes, 1);
  char c = 'b';
  iovec iov{&c, 1};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  errno = 0;
  EXPECT_EQ(sendmsg(p.client, &m, MSG_NOSIGNAL), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(sigpipes, 1);
  errno = 0;
  EXPECT_EQ(sendto(p.client, "a", 1, 0, nullptr, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(sigpipes, 2);
  errno = 0;
  EXPECT_EQ(write(p.client, "a", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(sigpipes, 3);
  errno = 0;
  EXPECT_EQ(writev(p.client, &iov, 1), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(sigpipes, 4);
  sigaction(SIGPIPE, &old, nullptr);
}

// As TCP: read(2) of no bytes returns 0 at once on an idle connection.
TEST(Preload, AReadOfNoBytesReturnsAtOnce) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7615);
  char buf[4];
  auto done = std::async(std::launch::async, [&] { return read(p.server, buf, 0); });
  bool returned = done.wait_for(test::scaled(5s)) == std::future_status::ready;
  if (!returned) write(p.client, "!", 1);  // let it go
  EXPECT_TRUE(returned) << "read of no bytes waited for data";
  EXPECT_EQ(done.get(), 0);
}

// As poll(2): more descriptors than RLIMIT_NOFILE is EINVAL, whatever they
// are (the preload looked at each for an rsocket, past the array).
TEST(Preload, PollOfMoreDescriptorsThanTheLimitIsInvalid) {
  if (fork_safe()) GTEST_SKIP();
  Pair p(7616);
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  ASSERT_LT(rl.rlim_cur, 1u << 24) << "too many to make";
  std::vector<pollfd> fds(rl.rlim_cur + 1, pollfd{-1, 0, 0});
  fds[0] = {p.server, POLLIN, 0};
  errno = 0;
  EXPECT_EQ(poll(fds.data(), fds.size(), 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(poll(fds.data(), fds.size() - 1, 0), 0) << strerror(errno);
}

TEST(PreloadFork, AChildServesAConnectionAcceptedBeforeTheFork) {
  if (!fork_safe()) GTEST_SKIP() << "runs with RDMAV_FORK_SAFE=1";
  long before = sent_packets();
  int l = listening(7611);
  pid_t child = -1;
  std::thread server([&] {
    int s = accept(l, nullptr, nullptr);
    ASSERT_GE(s, 0);
    child = fork();
    if (child == 0) {
      auto data = pattern(256 * 1024);
      size_t put = 0;
      while (put < data.size()) {
        ssize_t n = write(s, data.data() + put, data.size() - put);
        if (n <= 0) _exit(2);
        put += static_cast<size_t>(n);
      }
      char ack;
      _exit(read(s, &ack, 1) == 1 ? 0 : 3);
    }
    close(s);
  });
  int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = device_addr(7611);
  ASSERT_EQ(connect(c, sa(&a), sizeof a), 0) << strerror(errno);
  server.join();
  std::vector<char> in(256 * 1024);
  ASSERT_EQ(read_all(c, in.data(), in.size()), (ssize_t)in.size());
  EXPECT_EQ(in, pattern(in.size()));
  ASSERT_EQ(write(c, "k", 1), 1);
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GE(sent_packets() - before, 64) << "the connection stayed on TCP";
  close(c);
  close(l);
}

}  // namespace
}  // namespace rdmacm::rxe
