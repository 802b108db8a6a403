// Datagram rsockets on the real device, through the public r* calls, where
// they answer as kernel UDP does (measured with plain sockets on the host)
// and rdma-core 44's does not: rsendmsg sends to msg_name, an address given
// to rsendto does not become a connected socket's peer, a kernel UDP
// sender reaches an rsocket and is answered in plain datagrams, loopback
// destinations are reached. rdma-core 44 (RDMACM_REFERENCE) skips them all:
// its answers are EDESTADDRREQ, the last address as the peer, a dropped
// datagram, ENODEV.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

sockaddr* sa(void* a) { return reinterpret_cast<sockaddr*>(a); }

int rudp_on(uint16_t port) {
  int s = rsocket(AF_INET, SOCK_DGRAM, 0);
  EXPECT_GE(s, 0) << strerror(errno);
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(rbind(s, sa(&a), sizeof a), 0) << strerror(errno);
  return s;
}

bool rreadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return rpoll(&p, 1, 5000) == 1 && (p.revents & POLLIN);
}

// A kernel UDP socket on the device's address, by system call.
int kernel_on(uint16_t port) {
  int k = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0));
  EXPECT_GE(k, 0);
  sockaddr_in a = device_addr(port);
  EXPECT_EQ(bind(k, sa(&a), sizeof a), 0) << strerror(errno);
  return k;
}

bool kreadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 5000) == 1 && (p.revents & POLLIN);
}

TEST(RsocketDgramUdp, SendmsgSendsToMsgNameOverTheDevice) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 ignores msg_name";
  int r = rudp_on(7680), s = rudp_on(7681);
  sockaddr_in to = device_addr(7680);
  char data[] = "named";
  iovec iov{data, 5};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_name = &to;
  m.msg_namelen = sizeof to;
  long before = sent_packets();
  for (int i = 0; i < 4; i++) ASSERT_EQ(rsendmsg(s, &m, 0), 5) << strerror(errno);
  for (int i = 0; i < 4; i++) {
    ASSERT_TRUE(rreadable(r));
    char buf[8] = {};
    sockaddr_in from{};
    socklen_t flen = sizeof from;
    ASSERT_EQ(rrecvfrom(r, buf, sizeof buf, 0, sa(&from), &flen), 5);
    EXPECT_STREQ(buf, "named");
    EXPECT_EQ(from.sin_port, device_addr(7681).sin_port);
  }
  EXPECT_GE(sent_packets() - before, 1) << "nothing crossed rxe0";
  rclose(r);
  rclose(s);
}

// Kernel UDP: a connected socket may send elsewhere, and its peer stays.
TEST(RsocketDgramUdp, SendtoElsewhereKeepsTheConnectedPeer) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 makes the last address the peer";
  int peer = rudp_on(7682), other = rudp_on(7683), s = rudp_on(7684);
  sockaddr_in pa = device_addr(7682), oa = device_addr(7683);
  ASSERT_EQ(rconnect(s, sa(&pa), sizeof pa), 0) << strerror(errno);
  ASSERT_EQ(rsendto(s, "o", 1, 0, sa(&oa), sizeof oa), 1) << strerror(errno);
  ASSERT_EQ(rsend(s, "p", 1, 0), 1) << strerror(errno);
  char c = 0;
  ASSERT_TRUE(rreadable(other));
  EXPECT_EQ(rrecv(other, &c, 1, 0), 1);
  EXPECT_EQ(c, 'o');
  ASSERT_TRUE(rreadable(peer));
  EXPECT_EQ(rrecv(peer, &c, 1, 0), 1);
  EXPECT_EQ(c, 'p');
  pollfd p{other, POLLIN, 0};
  EXPECT_EQ(rpoll(&p, 1, 200), 0) << "the second datagram went to the last address";
  rclose(peer);
  rclose(other);
  rclose(s);
}

// A kernel UDP sender's datagram (no rsocket header) is delivered with its
// source; the answers reach it as plain datagrams.
TEST(RsocketDgramUdp, AKernelSenderIsDeliveredAndAnswered) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 drops it";
  int r = rudp_on(7685);
  int k = kernel_on(7686);
  sockaddr_in to = device_addr(7685), kname = device_addr(7686);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(sendto(k, "plain", 5, 0, sa(&to), sizeof to), 5);
    ASSERT_TRUE(rreadable(r)) << "datagram " << i << " never arrived";
    char buf[8] = {};
    sockaddr_in from{};
    socklen_t flen = sizeof from;
    ASSERT_EQ(rrecvfrom(r, buf, sizeof buf, 0, sa(&from), &flen), 5);
    EXPECT_STREQ(buf, "plain");
    EXPECT_EQ(from.sin_port, kname.sin_port);
    EXPECT_EQ(from.sin_addr.s_addr, kname.sin_addr.s_addr);
    ASSERT_EQ(rsendto(r, "reply", 5, 0, sa(&from), flen), 5) << strerror(errno);
    ASSERT_TRUE(kreadable(k));
    char got[32] = {};
    EXPECT_EQ(recv(k, got, sizeof got, MSG_DONTWAIT), 5) << "an rsocket header came with it";
    EXPECT_STREQ(got, "reply");
  }
  close(k);
  rclose(r);
}

// Kernel UDP: a connected socket receives only from its peer.
TEST(RsocketDgramUdp, AConnectedSocketHearsOnlyItsPeer) {
  if (reference()) GTEST_SKIP() << "rdma-core 44 takes every source's";
  int r = rudp_on(7687), peer = rudp_on(7688), stranger = rudp_on(7689);
  sockaddr_in ra = device_addr(7687), pa = device_addr(7688);
  // The stranger first talks to r until its datagrams cross rxe0 (a
  // sender's first ones come over UDP, which a connected UDP socket's
  // kernel filters already; then over UD).
  bool over_ud = false;
  for (int i = 0; i < 50 && !over_ud; i++) {
    long before = sent_packets();
    ASSERT_EQ(rsendto(stranger, "s", 1, 0, sa(&ra), sizeof ra), 1) << strerror(errno);
    ASSERT_TRUE(rreadable(r));
    char c;
    ASSERT_EQ(rrecv(r, &c, 1, 0), 1);
    over_ud = sent_packets() > before;
  }
  ASSERT_TRUE(over_ud) << "the stranger never sent over UD";
  ASSERT_EQ(rconnect(r, sa(&pa), sizeof pa), 0) << strerror(errno);
  for (int i = 0; i < 4; i++)
    ASSERT_EQ(rsendto(stranger, "s", 1, 0, sa(&ra), sizeof ra), 1) << strerror(errno);
  for (int i = 0; i < 4; i++)
    ASSERT_EQ(rsendto(peer, "p", 1, 0, sa(&ra), sizeof ra), 1) << strerror(errno);
  for (int i = 0; i < 4; i++) {
    ASSERT_TRUE(rreadable(r));
    char c = 0;
    sockaddr_in from{};
    socklen_t flen = sizeof from;
    ASSERT_EQ(rrecvfrom(r, &c, 1, 0, sa(&from), &flen), 1);
    EXPECT_EQ(c, 'p') << "datagram " << i << " came from another source";
    EXPECT_EQ(from.sin_port, pa.sin_port);
  }
  pollfd p{r, POLLIN, 0};
  EXPECT_EQ(rpoll(&p, 1, 200), 0) << "a stranger's datagram was delivered";
  rclose(r);
  rclose(peer);
  rclose(stranger);
}

TEST(RsocketDgramUdp, LoopbackIsReached) {
  if (reference()) GTEST_SKIP() << "rdma-core 44: ENODEV";
  int k = static_cast<int>(syscall(SYS_socket, AF_INET6, SOCK_DGRAM, 0));
  sockaddr_in6 lo{};
  lo.sin6_family = AF_INET6;
  lo.sin6_addr = in6addr_loopback;
  ASSERT_EQ(bind(k, sa(&lo), sizeof lo), 0);
  socklen_t len = sizeof lo;
  ASSERT_EQ(getsockname(k, sa(&lo), &len), 0);
  int r = rsocket(AF_INET6, SOCK_DGRAM, 0);
  ASSERT_EQ(rsendto(r, "six", 3, 0, sa(&lo), sizeof lo), 3) << strerror(errno);
  ASSERT_TRUE(kreadable(k));
  char buf[8] = {};
  EXPECT_EQ(recv(k, buf, sizeof buf, MSG_DONTWAIT), 3);
  close(k);
  rclose(r);
}

// As UDP's recvmsg: a datagram longer than the buffer sets MSG_TRUNC in
// msg_flags, MSG_TRUNC as a flag returns its whole length, and a control
// buffer comes back empty (msg_controllen 0). Over the device (rsocket to
// rsocket, rxe0's packets counted) and from a kernel sender (plain path).
// rdma-core 44: ENOTSUP for the control buffer, msg_flags untouched.
TEST(RsocketDgramUdp, RecvmsgSaysTruncAndGivesAnEmptyControlBuffer) {
  if (reference()) GTEST_SKIP() << "rdma-core 44: ENOTSUP with a control buffer";
  int r = rudp_on(7690), s = rudp_on(7691), k = kernel_on(7692);
  sockaddr_in to = device_addr(7690);
  char big[100];
  std::memset(big, 'd', sizeof big);
  long p0 = sent_packets();
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(rsendto(s, big, sizeof big, 0, sa(&to), sizeof to), 100) << strerror(errno);
  ASSERT_EQ(sendto(k, big, sizeof big, 0, sa(&to), sizeof to), 100);
  for (const char* way : {"device", "device, MSG_TRUNC", "kernel sender"}) {
    SCOPED_TRACE(way);
    ASSERT_TRUE(rreadable(r));
    char buf[10], control[64];
    iovec iov{buf, sizeof buf};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    m.msg_flags = -1;
    bool whole = !std::strcmp(way, "device, MSG_TRUNC");
    EXPECT_EQ(rrecvmsg(r, &m, whole ? MSG_TRUNC : 0), whole ? 100 : 10) << strerror(errno);
    EXPECT_EQ(m.msg_flags, MSG_TRUNC);
    EXPECT_EQ(m.msg_controllen, 0u);
    EXPECT_EQ(buf[9], 'd');
  }
  EXPECT_GE(sent_packets() - p0, 2) << "the rsocket's datagrams did not cross rxe0";
  // One that fits: no flag.
  ASSERT_EQ(rsendto(s, big, 5, 0, sa(&to), sizeof to), 5);
  ASSERT_TRUE(rreadable(r));
  char buf[10];
  iovec iov{buf, sizeof buf};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_flags = -1;
  EXPECT_EQ(rrecvmsg(r, &m, 0), 5);
  EXPECT_EQ(m.msg_flags, 0);
  close(k);
  rclose(r);
  rclose(s);
}

}  // namespace
}  // namespace rdmacm::rxe
