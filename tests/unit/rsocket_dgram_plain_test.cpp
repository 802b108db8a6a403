// Datagram rsockets and plain UDP, on loopback (no device needed: loopback
// has no RDMA path, so these go over the rsocket's UDP socket as kernel UDP
// would carry them). Each answer is the kernel's, checked here against a
// kernel UDP socket made by system call: a kernel sender's datagram reaches
// an rsocket with its source; an rsocket reaches a kernel socket on
// 127.0.0.1 and ::1 with the bytes alone and is answered; rsendmsg sends
// to msg_name; a destination given to rsendto does not become the peer.
// rdma-core 44: the kernel sender's datagram is dropped, sendto to a
// loopback address fails (ENODEV), rsendmsg ignores msg_name.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dgram_plain {
namespace {

#define PLAIN_EXPECT_ERRNO(call, err)         \
  do {                                        \
    errno = 0;                                \
    EXPECT_EQ((call), -1);                    \
    EXPECT_EQ(errno, err) << strerror(errno); \
  } while (0)

union Addr {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};

Addr loopback(int family) {
  Addr a{};
  if (family == AF_INET) {
    a.sin.sin_family = AF_INET;
    a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    a.sin6.sin6_family = AF_INET6;
    a.sin6.sin6_addr = in6addr_loopback;
  }
  return a;
}

socklen_t len_of(int family) {
  return family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

// A kernel UDP socket bound on loopback, made by system call (never an
// rsocket, whatever is preloaded).
int kernel_socket(int family, Addr* name) {
  int s = static_cast<int>(syscall(SYS_socket, family, SOCK_DGRAM, 0));
  EXPECT_GE(s, 0) << strerror(errno);
  *name = loopback(family);
  EXPECT_EQ(bind(s, &name->sa, len_of(family)), 0) << strerror(errno);
  socklen_t len = sizeof(*name);
  EXPECT_EQ(getsockname(s, &name->sa, &len), 0);
  return s;
}

// An rsocket bound on loopback (port 0: the kernel picks).
int bound_rsocket(int family, Addr* name) {
  int fd = rsocket(family, SOCK_DGRAM, 0);
  EXPECT_GE(fd, 0) << strerror(errno);
  *name = loopback(family);
  EXPECT_EQ(rbind(fd, &name->sa, len_of(family)), 0) << strerror(errno);
  socklen_t len = sizeof(*name);
  EXPECT_EQ(rgetsockname(fd, &name->sa, &len), 0);
  return fd;
}

bool readable(int fd, bool rsock) {
  pollfd p{fd, POLLIN, 0};
  return (rsock ? rpoll(&p, 1, 5000) : poll(&p, 1, 5000)) == 1 && (p.revents & POLLIN);
}

class RsocketDgramPlain : public ::testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Families, RsocketDgramPlain, ::testing::Values(AF_INET, AF_INET6),
                         [](const auto& info) { return info.param == AF_INET ? "v4" : "v6"; });

// A kernel UDP sender (not preloaded, or fallen back) reaches an rsocket:
// the bytes, and its address as the source; the rsocket's answer reaches
// it with the bytes alone.
TEST_P(RsocketDgramPlain, AKernelSenderReachesAnRsocketAndIsAnswered) {
  int family = GetParam();
  Addr kname, rname;
  int k = kernel_socket(family, &kname);
  int r = bound_rsocket(family, &rname);
  const char msg[] = "from the kernel";
  ASSERT_EQ(sendto(k, msg, sizeof(msg), 0, &rname.sa, len_of(family)), (ssize_t)sizeof(msg));
  ASSERT_TRUE(readable(r, true)) << "the datagram never reached the rsocket";
  char buf[64] = {};
  Addr from{};
  socklen_t flen = sizeof(from);
  ASSERT_EQ(rrecvfrom(r, buf, sizeof(buf), 0, &from.sa, &flen), (ssize_t)sizeof(msg));
  EXPECT_STREQ(buf, msg);
  ASSERT_EQ(flen, len_of(family));
  EXPECT_EQ(memcmp(&from, &kname, flen), 0) << "the source is the kernel sender's";
  const char answer[] = "answer";
  ASSERT_EQ(rsendto(r, answer, sizeof(answer), 0, &from.sa, flen), (ssize_t)sizeof(answer))
      << strerror(errno);
  ASSERT_TRUE(readable(k, false));
  char got[64] = {};
  EXPECT_EQ(recv(k, got, sizeof(got), MSG_DONTWAIT), (ssize_t)sizeof(answer)) << "no header";
  EXPECT_STREQ(got, answer);
  close(k);
  EXPECT_EQ(rclose(r), 0);
}

// Sending to a loopback address (RoCE has none): over the UDP socket, as
// the kernel delivers it; a socket bound to the wildcard is reached too.
TEST_P(RsocketDgramPlain, AnRsocketSendsToLoopback) {
  int family = GetParam();
  Addr kname;
  int k = kernel_socket(family, &kname);
  int r = rsocket(family, SOCK_DGRAM, 0);
  ASSERT_GE(r, 0);
  const char msg[] = "to loopback";
  ASSERT_EQ(rsendto(r, msg, sizeof(msg), 0, &kname.sa, len_of(family)), (ssize_t)sizeof(msg))
      << strerror(errno);
  ASSERT_TRUE(readable(k, false));
  char buf[64] = {};
  Addr from{};
  socklen_t flen = sizeof(from);
  EXPECT_EQ(recvfrom(k, buf, sizeof(buf), MSG_DONTWAIT, &from.sa, &flen), (ssize_t)sizeof(msg));
  EXPECT_STREQ(buf, msg);
  // The rsocket was bound at its first send, as the kernel's: it hears back.
  ASSERT_EQ(sendto(k, "back", 4, 0, &from.sa, flen), 4);
  ASSERT_TRUE(readable(r, true));
  EXPECT_EQ(rrecv(r, buf, sizeof(buf), 0), 4);
  // A datagram larger than a UD message is UDP's to carry.
  std::vector<char> big(8000, 'b');
  EXPECT_EQ(rsendto(r, big.data(), big.size(), 0, &kname.sa, len_of(family)),
            (ssize_t)big.size()) << strerror(errno);
  ASSERT_TRUE(readable(k, false));
  std::vector<char> in(10000);
  EXPECT_EQ(recv(k, in.data(), in.size(), MSG_DONTWAIT), (ssize_t)big.size());
  close(k);
  EXPECT_EQ(rclose(r), 0);
}

// Two rsockets on loopback talk to each other, connected too.
TEST_P(RsocketDgramPlain, TwoRsocketsOnLoopback) {
  int family = GetParam();
  Addr an, bn;
  int a = bound_rsocket(family, &an);
  int b = bound_rsocket(family, &bn);
  ASSERT_EQ(rconnect(a, &bn.sa, len_of(family)), 0) << strerror(errno);
  ASSERT_EQ(rsend(a, "ping", 4, 0), 4) << strerror(errno);
  ASSERT_TRUE(readable(b, true));
  char buf[16];
  Addr from{};
  socklen_t flen = sizeof(from);
  ASSERT_EQ(rrecvfrom(b, buf, sizeof(buf), 0, &from.sa, &flen), 4);
  EXPECT_EQ(memcmp(&from, &an, flen), 0);
  ASSERT_EQ(rsendto(b, "pong", 4, 0, &from.sa, flen), 4) << strerror(errno);
  ASSERT_TRUE(readable(a, true));
  EXPECT_EQ(rrecv(a, buf, sizeof(buf), 0), 4);
  Addr peer{};
  socklen_t plen = sizeof(peer);
  EXPECT_EQ(rgetpeername(a, &peer.sa, &plen), 0);
  PLAIN_EXPECT_ERRNO(rgetpeername(b, &peer.sa, &plen), ENOTCONN);
  EXPECT_EQ(rclose(a), 0);
  EXPECT_EQ(rclose(b), 0);
}

// rsendmsg sends to msg_name, as sendmsg(2) on UDP; a name of length 0 is
// none (EDESTADDRREQ unconnected), a short one EINVAL. The kernel's
// answers, side by side.
TEST_P(RsocketDgramPlain, SendmsgSendsToItsName) {
  int family = GetParam();
  Addr kname;
  int k = kernel_socket(family, &kname);
  int r = rsocket(family, SOCK_DGRAM, 0);
  int ref = static_cast<int>(syscall(SYS_socket, family, SOCK_DGRAM, 0));
  ASSERT_GE(r, 0);
  char data[] = "named";
  iovec iov{data, 5};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_name = &kname;
  for (socklen_t len : {socklen_t{0}, socklen_t{4}}) {
    m.msg_namelen = len;
    errno = 0;
    ssize_t want = sendmsg(ref, &m, 0);
    int want_errno = errno;
    SCOPED_TRACE(len);
    PLAIN_EXPECT_ERRNO(rsendmsg(r, &m, 0), want_errno);
    EXPECT_EQ(want, -1);
  }
  m.msg_namelen = len_of(family);
  EXPECT_EQ(rsendmsg(r, &m, 0), 5) << strerror(errno);
  ASSERT_TRUE(readable(k, false));
  char buf[16] = {};
  EXPECT_EQ(recv(k, buf, sizeof(buf), MSG_DONTWAIT), 5);
  // The address given was not made the peer (rdma-core 44 makes it one).
  errno = 0;
  ssize_t want = send(ref, data, 5, 0);
  int want_errno = errno;
  EXPECT_EQ(want, -1);
  PLAIN_EXPECT_ERRNO(rsend(r, data, 5, 0), want_errno);
  close(ref);
  close(k);
  EXPECT_EQ(rclose(r), 0);
}

// A connected rsocket sends to another address given (UDP allows it), and
// its peer stays its peer.
TEST_P(RsocketDgramPlain, ConnectedSendsElsewhereAndKeepsItsPeer) {
  int family = GetParam();
  Addr pn, on;
  int peer = kernel_socket(family, &pn);
  int other = kernel_socket(family, &on);
  int r = rsocket(family, SOCK_DGRAM, 0);
  ASSERT_EQ(rconnect(r, &pn.sa, len_of(family)), 0) << strerror(errno);
  ASSERT_EQ(rsendto(r, "o", 1, 0, &on.sa, len_of(family)), 1) << strerror(errno);
  ASSERT_EQ(rsend(r, "p", 1, 0), 1) << strerror(errno);
  char c = 0;
  ASSERT_TRUE(readable(other, false));
  EXPECT_EQ(recv(other, &c, 1, MSG_DONTWAIT), 1);
  EXPECT_EQ(c, 'o');
  ASSERT_TRUE(readable(peer, false));
  EXPECT_EQ(recv(peer, &c, 1, MSG_DONTWAIT), 1);
  EXPECT_EQ(c, 'p');
  close(peer);
  close(other);
  EXPECT_EQ(rclose(r), 0);
}

// An address of this host's that no RDMA device has (here none has any):
// kernel UDP carries the datagrams both ways, sent or connected to.
TEST(RsocketDgramPlainNoDevice, AnAddressWithoutRdmaIsReachedOverUdp) {
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  Addr host{};
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
      continue;
    std::memcpy(&host.sin, i->ifa_addr, sizeof(sockaddr_in));
    break;
  }
  freeifaddrs(list);
  if (!host.sin.sin_family) GTEST_SKIP() << "no IPv4 address but loopback";
  int k = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0));
  ASSERT_EQ(bind(k, &host.sa, sizeof(sockaddr_in)), 0) << strerror(errno);
  socklen_t len = sizeof(host);
  ASSERT_EQ(getsockname(k, &host.sa, &len), 0);
  int r = rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_EQ(rsendto(r, "host", 4, 0, &host.sa, sizeof(sockaddr_in)), 4) << strerror(errno);
  ASSERT_TRUE(readable(k, false));
  char buf[8] = {};
  Addr from{};
  socklen_t flen = sizeof(from);
  ASSERT_EQ(recvfrom(k, buf, sizeof(buf), MSG_DONTWAIT, &from.sa, &flen), 4);
  ASSERT_EQ(sendto(k, "back", 4, 0, &from.sa, flen), 4);
  ASSERT_TRUE(readable(r, true));
  EXPECT_EQ(rrecv(r, buf, sizeof(buf), 0), 4);
  int c = rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_EQ(rconnect(c, &host.sa, sizeof(sockaddr_in)), 0) << strerror(errno);
  ASSERT_EQ(rsend(c, "conn", 4, 0), 4) << strerror(errno);
  ASSERT_TRUE(readable(k, false));
  EXPECT_EQ(recv(k, buf, sizeof(buf), MSG_DONTWAIT), 4);
  close(k);
  EXPECT_EQ(rclose(r), 0);
  EXPECT_EQ(rclose(c), 0);
}

// Kernel UDP: connect(AF_UNSPEC) removes the peer (send: EDESTADDRREQ).
TEST_P(RsocketDgramPlain, ConnectToUnspecRemovesThePeer) {
  int family = GetParam();
  Addr pn;
  int peer = kernel_socket(family, &pn);
  int r = rsocket(family, SOCK_DGRAM, 0);
  int ref = static_cast<int>(syscall(SYS_socket, family, SOCK_DGRAM, 0));
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  for (int s : {r, ref}) {
    bool rs = s == r;
    SCOPED_TRACE(rs ? "rsocket" : "kernel");
    ASSERT_EQ(rs ? rconnect(s, &pn.sa, len_of(family)) : connect(s, &pn.sa, len_of(family)), 0);
    EXPECT_EQ(rs ? rsend(s, "x", 1, 0) : send(s, "x", 1, 0), 1) << strerror(errno);
    EXPECT_EQ(rs ? rconnect(s, &unspec, sizeof unspec) : connect(s, &unspec, sizeof unspec), 0)
        << strerror(errno);
    PLAIN_EXPECT_ERRNO(rs ? rsend(s, "x", 1, 0) : send(s, "x", 1, 0), EDESTADDRREQ);
  }
  close(ref);
  close(peer);
  EXPECT_EQ(rclose(r), 0);
}

// A flood of plain datagrams the application does not read is bounded as a
// receive buffer is: the first are kept, the rest dropped. The sender waits
// after each batch until the rsocket's UDP socket (its fd) is empty: the
// service took every datagram, so none was dropped by the kernel.
TEST(RsocketDgramPlainFlood, QueuedUpToTheReceiveBuffer) {
  Addr rname, kname;
  int r = bound_rsocket(AF_INET, &rname);
  int k = kernel_socket(AF_INET, &kname);
  std::vector<char> msg(1000, 'f');
  constexpr int kSent = 2000;
  for (int i = 0; i < kSent; ++i) {
    ASSERT_EQ(sendto(k, msg.data(), msg.size(), 0, &rname.sa, sizeof(sockaddr_in)), 1000);
    if (i % 50 != 49) continue;
    int queued = 1;
    for (int tries = 0; tries < 5000 && queued; ++tries) {
      ASSERT_EQ(ioctl(r, SIOCINQ, &queued), 0) << strerror(errno);
      if (queued) usleep(1000);
    }
    ASSERT_EQ(queued, 0) << "the service does not read the UDP socket";
  }
  int kept = 0;
  char buf[2000];
  while (rrecv(r, buf, sizeof(buf), MSG_DONTWAIT) > 0) ++kept;
  EXPECT_EQ(errno, EWOULDBLOCK);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, kSent) << "nothing was dropped: the queue is unbounded";
  close(k);
  EXPECT_EQ(rclose(r), 0);
}

}  // namespace
}  // namespace dgram_plain
