// UDP programs under librspreload.so (rxe.basics, in rxe_preload_tests):
// plain socket calls on datagram sockets, each answer checked against what
// kernel UDP gives (measured with plain sockets on the host and written
// beside each case): sendmsg to msg_name, sendmmsg and recvmmsg (also on a
// stream, which the kernel allows), a kernel UDP sender (raw system calls:
// the preload never sees it) reaching a preloaded receiver and answered,
// loopback destinations, and the errors of an unconnected socket.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

sockaddr* sa(void* a) { return reinterpret_cast<sockaddr*>(a); }

bool fork_mode() { return getenv("RDMAV_FORK_SAFE") && atoi(getenv("RDMAV_FORK_SAFE")); }

int udp_on(uint16_t port) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  EXPECT_GE(s, 0) << strerror(errno);
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(bind(s, sa(&a), sizeof a), 0) << strerror(errno);
  return s;
}

// Up to 5 s for fd to be readable (never for ever).
bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 5000) == 1 && (p.revents & POLLIN);
}

// Kernel UDP: sendmsg on an unconnected socket sends to msg_name.
TEST(PreloadDgram, SendmsgSendsToMsgName) {
  if (fork_mode()) GTEST_SKIP();
  int r = udp_on(7660), s = udp_on(7661);
  sockaddr_in to = device_addr(7660), want = device_addr(7661);
  char data[] = "named";
  iovec iov{data, 5};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_name = &to;
  m.msg_namelen = sizeof to;
  ASSERT_EQ(sendmsg(s, &m, 0), 5) << strerror(errno);
  ASSERT_TRUE(readable(r));
  char buf[16] = {};
  sockaddr_in from{};
  socklen_t flen = sizeof from;
  ASSERT_EQ(recvfrom(r, buf, sizeof buf, 0, sa(&from), &flen), 5);
  EXPECT_STREQ(buf, "named");
  EXPECT_EQ(from.sin_port, want.sin_port);
  EXPECT_EQ(from.sin_addr.s_addr, want.sin_addr.s_addr);
  // Kernel UDP: a name of length 0 is none (EDESTADDRREQ), a short one EINVAL.
  m.msg_namelen = 0;
  errno = 0;
  EXPECT_EQ(sendmsg(s, &m, 0), -1);
  EXPECT_EQ(errno, EDESTADDRREQ) << strerror(errno);
  m.msg_namelen = 4;
  errno = 0;
  EXPECT_EQ(sendmsg(s, &m, 0), -1);
  EXPECT_EQ(errno, EINVAL) << strerror(errno);
  close(r);
  close(s);
}

// Kernel UDP: the count sent; a batch stops at the first message that
// fails (an error only if that is the first); msg_len filled in;
// recvmmsg with MSG_WAITFORONE returns what is there after the first.
TEST(PreloadDgram, SendmmsgAndRecvmmsg) {
  if (fork_mode()) GTEST_SKIP();
  int r = udp_on(7662), s = udp_on(7663);
  sockaddr_in to = device_addr(7662);
  const char* words[3] = {"one", "two", "three"};
  mmsghdr out[3]{};
  iovec oiov[3];
  for (int i = 0; i < 3; i++) {
    oiov[i] = {const_cast<char*>(words[i]), strlen(words[i])};
    out[i].msg_hdr.msg_iov = &oiov[i];
    out[i].msg_hdr.msg_iovlen = 1;
    out[i].msg_hdr.msg_name = &to;
    out[i].msg_hdr.msg_namelen = sizeof to;
    out[i].msg_len = 99;
  }
  ASSERT_EQ(sendmmsg(s, out, 3, 0), 3) << strerror(errno);
  for (int i = 0; i < 3; i++) EXPECT_EQ(out[i].msg_len, strlen(words[i]));
  mmsghdr in[4]{};
  iovec iiov[4];
  char bufs[4][16];
  sockaddr_in from[4];
  auto reset = [&] {
    for (int i = 0; i < 4; i++) {
      memset(bufs[i], 0, sizeof bufs[i]);
      iiov[i] = {bufs[i], sizeof bufs[i]};
      in[i].msg_hdr = msghdr{};
      in[i].msg_hdr.msg_iov = &iiov[i];
      in[i].msg_hdr.msg_iovlen = 1;
      in[i].msg_hdr.msg_name = &from[i];
      in[i].msg_hdr.msg_namelen = sizeof from[i];
    }
  };
  std::vector<std::string> got;
  for (int round = 0; round < 3 && got.size() < 3; round++) {
    reset();
    int n = recvmmsg(r, in, 4, MSG_WAITFORONE, nullptr);
    ASSERT_GE(n, 1) << strerror(errno);
    for (int i = 0; i < n; i++) {
      EXPECT_EQ(in[i].msg_len, strlen(bufs[i]));
      EXPECT_EQ(in[i].msg_hdr.msg_namelen, sizeof(sockaddr_in));
      got.emplace_back(bufs[i]);
    }
  }
  // Datagrams: the first ones may come over UDP, the rest over UD.
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"one", "three", "two"}));
  reset();
  errno = 0;
  EXPECT_EQ(recvmmsg(r, in, 4, MSG_DONTWAIT, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN) << strerror(errno);
  // A bad second message: one sent. A bad first: -1 and its errno.
  out[1].msg_hdr.msg_namelen = 0;
  EXPECT_EQ(sendmmsg(s, out, 3, 0), 1) << strerror(errno);
  out[0].msg_hdr.msg_namelen = 0;
  errno = 0;
  EXPECT_EQ(sendmmsg(s, out, 3, 0), -1);
  EXPECT_EQ(errno, EDESTADDRREQ) << strerror(errno);
  EXPECT_EQ(sendmmsg(s, out, 0, 0), 0);
  ASSERT_TRUE(readable(r));
  reset();
  EXPECT_EQ(recvmmsg(r, in, 4, MSG_DONTWAIT, nullptr), 1);
  EXPECT_STREQ(bufs[0], "one");
  close(r);
  close(s);
}

// Kernel TCP takes both calls too: each message one send or one receive;
// and sendmsg with a name on a connected stream ignores it.
TEST(PreloadDgram, SendmmsgAndRecvmmsgOnAStream) {
  if (fork_mode()) GTEST_SKIP();
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = device_addr(7664);
  ASSERT_EQ(bind(l, sa(&a), sizeof a), 0) << strerror(errno);
  ASSERT_EQ(listen(l, 4), 0);
  int server = -1;
  std::thread accepter([&] { server = accept(l, nullptr, nullptr); });
  int c = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(c, sa(&a), sizeof a), 0) << strerror(errno);
  accepter.join();
  ASSERT_GE(server, 0);
  char text[] = "abcdefghi";
  mmsghdr out[3]{};
  iovec oiov[3];
  for (int i = 0; i < 3; i++) {
    oiov[i] = {text + 3 * i, 3};
    out[i].msg_hdr.msg_iov = &oiov[i];
    out[i].msg_hdr.msg_iovlen = 1;
  }
  ASSERT_EQ(sendmmsg(c, out, 3, 0), 3) << strerror(errno);
  sockaddr_in elsewhere = device_addr(9);
  iovec iov{const_cast<char*>("jkl"), 3};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_name = &elsewhere;
  m.msg_namelen = sizeof elsewhere;
  ASSERT_EQ(sendmsg(c, &m, 0), 3) << strerror(errno);
  std::string got;
  for (int round = 0; round < 20 && got.size() < 12; round++) {
    ASSERT_TRUE(readable(server));
    mmsghdr in[4]{};
    char bufs[4][3];
    iovec iiov[4];
    for (int i = 0; i < 4; i++) {
      iiov[i] = {bufs[i], 3};
      in[i].msg_hdr.msg_iov = &iiov[i];
      in[i].msg_hdr.msg_iovlen = 1;
    }
    int n = recvmmsg(server, in, 4, MSG_DONTWAIT, nullptr);
    ASSERT_GE(n, 1) << strerror(errno);
    for (int i = 0; i < n; i++) got.append(bufs[i], in[i].msg_len);
  }
  EXPECT_EQ(got, "abcdefghijkl");
  close(c);
  close(server);
  close(l);
}

// A sender on kernel UDP (not preloaded, or fallen back: raw system calls
// here) reaches a preloaded receiver, which sees its bytes and address,
// and its answer reaches the sender with the bytes alone.
TEST(PreloadDgram, AKernelUdpSenderReachesAPreloadedReceiver) {
  if (fork_mode()) GTEST_SKIP();
  int r = udp_on(7665);
  int k = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0));
  ASSERT_GE(k, 0);
  sockaddr_in kname = device_addr(7666), to = device_addr(7665);
  ASSERT_EQ(syscall(SYS_bind, k, sa(&kname), sizeof kname), 0) << strerror(errno);
  ASSERT_EQ(syscall(SYS_sendto, k, "kernel", 6, 0, sa(&to), sizeof to), 6) << strerror(errno);
  ASSERT_TRUE(readable(r)) << "the kernel sender's datagram never reached the receiver";
  char buf[16] = {};
  sockaddr_in from{};
  socklen_t flen = sizeof from;
  ASSERT_EQ(recvfrom(r, buf, sizeof buf, 0, sa(&from), &flen), 6);
  EXPECT_STREQ(buf, "kernel");
  EXPECT_EQ(from.sin_port, kname.sin_port);
  EXPECT_EQ(from.sin_addr.s_addr, kname.sin_addr.s_addr);
  ASSERT_EQ(sendto(r, "answer", 6, 0, sa(&from), flen), 6) << strerror(errno);
  pollfd p{k, POLLIN, 0};
  ASSERT_EQ(syscall(SYS_poll, &p, 1, 5000), 1);
  char got[32] = {};
  EXPECT_EQ(syscall(SYS_recvfrom, k, got, sizeof got, MSG_DONTWAIT, nullptr, nullptr), 6)
      << "the answer carries no rsocket header";
  EXPECT_STREQ(got, "answer");
  syscall(SYS_close, k);
  close(r);
}

// Kernel UDP delivers to 127.0.0.1 and ::1 (RoCE has no loopback: these go
// over the sockets' UDP path), to a receiver on the wildcard address.
TEST(PreloadDgram, LoopbackBothFamilies) {
  if (fork_mode()) GTEST_SKIP();
  for (int family : {AF_INET, AF_INET6}) {
    SCOPED_TRACE(family == AF_INET ? "127.0.0.1" : "::1");
    union {
      sockaddr_in in;
      sockaddr_in6 in6;
    } any{}, lo{};
    socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    uint16_t port = family == AF_INET ? 7667 : 7668;
    if (family == AF_INET) {
      any.in.sin_family = lo.in.sin_family = AF_INET;
      any.in.sin_port = lo.in.sin_port = htons(port);
      lo.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
      any.in6.sin6_family = lo.in6.sin6_family = AF_INET6;
      any.in6.sin6_port = lo.in6.sin6_port = htons(port);
      lo.in6.sin6_addr = in6addr_loopback;
    }
    int r = socket(family, SOCK_DGRAM, 0);
    int s = socket(family, SOCK_DGRAM, 0);
    ASSERT_EQ(bind(r, sa(&any), len), 0) << strerror(errno);
    ASSERT_EQ(sendto(s, "lo", 2, 0, sa(&lo), len), 2) << strerror(errno);
    ASSERT_TRUE(readable(r));
    char buf[8] = {};
    sockaddr_in6 from{};
    socklen_t flen = sizeof from;
    ASSERT_EQ(recvfrom(r, buf, sizeof buf, 0, sa(&from), &flen), 2);
    EXPECT_STREQ(buf, "lo");
    ASSERT_EQ(sendto(r, "back", 4, 0, sa(&from), flen), 4) << strerror(errno);
    ASSERT_TRUE(readable(s));
    EXPECT_EQ(recv(s, buf, sizeof buf, 0), 4);
    close(r);
    close(s);
  }
}

// Kernel UDP multicast, both ways: a preloaded sender reaches a group a
// kernel socket joined; a preloaded socket that joins a group receives a
// kernel sender's datagrams to it.
TEST(PreloadDgram, MulticastBothWays) {
  if (fork_mode()) GTEST_SKIP();
  ip_mreqn join{};
  inet_pton(AF_INET, "239.7.7.7", &join.imr_multiaddr);
  join.imr_address = device_addr(0).sin_addr;
  sockaddr_in group{};
  group.sin_family = AF_INET;
  group.sin_addr = join.imr_multiaddr;
  for (bool preloaded_sender : {true, false}) {
    SCOPED_TRACE(preloaded_sender ? "preloaded sender" : "preloaded receiver");
    uint16_t port = preloaded_sender ? 7670 : 7671;
    group.sin_port = htons(port);
    int r = preloaded_sender ? static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0))
                             : socket(AF_INET, SOCK_DGRAM, 0);
    int s = preloaded_sender ? socket(AF_INET, SOCK_DGRAM, 0)
                             : static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0));
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(port);
    ASSERT_EQ(bind(r, sa(&any), sizeof any), 0) << strerror(errno);
    ASSERT_EQ(setsockopt(r, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join), 0)
        << strerror(errno);
    ASSERT_EQ(setsockopt(s, IPPROTO_IP, IP_MULTICAST_IF, &join, sizeof join), 0)
        << strerror(errno);
    ASSERT_EQ(sendto(s, "group", 5, 0, sa(&group), sizeof group), 5) << strerror(errno);
    ASSERT_TRUE(readable(r));
    char buf[8] = {};
    EXPECT_EQ(recv(r, buf, sizeof buf, 0), 5);
    EXPECT_STREQ(buf, "group");
    close(r);
    close(s);
  }
}

// Kernel UDP's answers on an unconnected socket.
TEST(PreloadDgram, ErrorsOfAnUnconnectedSocket) {
  if (fork_mode()) GTEST_SKIP();
  int r = udp_on(7669);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in peer{};
  socklen_t plen = sizeof peer;
  errno = 0;
  EXPECT_EQ(getpeername(s, sa(&peer), &plen), -1);
  EXPECT_EQ(errno, ENOTCONN) << strerror(errno);
  sockaddr_in a = device_addr(0);
  errno = 0;
  EXPECT_EQ(bind(s, sa(&a), sizeof(a) - 1), -1);
  EXPECT_EQ(errno, EINVAL) << strerror(errno);
  // A sendto does not make its address the peer: send fails after it.
  sockaddr_in to = device_addr(7669);
  ASSERT_EQ(sendto(s, "x", 1, 0, sa(&to), sizeof to), 1) << strerror(errno);
  errno = 0;
  EXPECT_EQ(send(s, "y", 1, 0), -1);
  EXPECT_EQ(errno, EDESTADDRREQ) << strerror(errno);
  close(r);
  close(s);
}

}  // namespace
}  // namespace rdmacm::rxe
