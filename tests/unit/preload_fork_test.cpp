// The TCP side of librspreload.so's fork-mode move (preload/fork_peer.h),
// over loopback TCP: what each end makes of what its peer sends (or does not
// send) while the connection moves to RDMA, and that every wait ends by its
// deadline. The RDMA side is tested on a device (tests/rxe/preload_test.cpp,
// PreloadFork).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "../../preload/fork_peer.h"
#include "../common/time_scale.h"

namespace rspreload {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A connected loopback TCP pair: `mover` is the end under test, `peer` the other.
struct TcpPair {
  int mover = -1, peer = -1;
  TcpPair() {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(l, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(listen(l, 1), 0);
    EXPECT_EQ(getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
    mover = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(mover, reinterpret_cast<sockaddr*>(&a), len), 0);
    peer = accept(l, nullptr, nullptr);
    EXPECT_GE(peer, 0);
    close(l);
  }
  ~TcpPair() {
    if (mover >= 0) close(mover);
    if (peer >= 0) close(peer);
  }
  void send_bytes(const void* p, size_t n) { ASSERT_EQ(send(peer, p, n, 0), (ssize_t)n); }
  // Until what the peer sent is readable at `mover` (loopback: at once).
  void settle() {
    pollfd p{mover, POLLIN | POLLRDHUP, 0};
    poll(&p, 1, 1000);
  }
  size_t readable() {
    char buf[64];
    ssize_t n = recv(mover, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }
};

const unsigned char kZero[4] = {};

TEST(PreloadForkPeer, ADeadlineCountsDown) {
  EXPECT_EQ(Deadline::in(0).left_ms(), 0);
  int left = Deadline::in(1500).left_ms();
  EXPECT_GT(left, 1500 - rdmacm::test::scaled_ms(200));
  EXPECT_LE(left, 1500);
}

// A blocking accept's SO_RCVTIMEO (listener.cpp): a timeval, as long as a
// program may set it; poll takes an int of milliseconds.
TEST(PreloadForkPeer, ADeadlineFromATimevalRoundsUpAndAFarOneReadsAsIntMax) {
  int left = Deadline::after(timeval{2, 500}).left_ms();
  EXPECT_GT(left, 2001 - rdmacm::test::scaled_ms(200));
  EXPECT_LE(left, 2001);
  EXPECT_EQ(Deadline::after(timeval{30 * 86400, 0}).left_ms(), INT_MAX);
  EXPECT_EQ(Deadline::after(timeval{LONG_MAX, 999999}).left_ms(), INT_MAX);
}

TEST(PreloadForkPeer, TheActiveSideReadsTheAnnouncementWithoutConsumingIt) {
  TcpPair t;
  EXPECT_EQ(tcp_peer_now(t.mover), TcpPeer::quiet);
  t.send_bytes(kZero, 4);
  t.settle();
  EXPECT_EQ(tcp_peer_now(t.mover), TcpPeer::zero);
  EXPECT_EQ(t.readable(), 4u) << "the announcement stays in the stream, as rdma-core's peek";
}

TEST(PreloadForkPeer, BytesThatAreNotTheAnnouncementAreData) {
  TcpPair t;
  t.send_bytes("GET ", 4);
  t.settle();
  EXPECT_EQ(tcp_peer_now(t.mover), TcpPeer::data);
  TcpPair u;
  const unsigned char almost[4] = {0, 0, 0, 1};
  u.send_bytes(almost, 4);
  u.settle();
  EXPECT_EQ(tcp_peer_now(u.mover), TcpPeer::data);
  TcpPair v;
  const unsigned char first[1] = {7};
  v.send_bytes(first, 1);
  v.settle();
  EXPECT_EQ(tcp_peer_now(v.mover), TcpPeer::data) << "one non-zero byte is enough to know";
}

TEST(PreloadForkPeer, APartialAnnouncementWaitsForItsRestUnlessTheStreamEnds) {
  TcpPair t;
  t.send_bytes(kZero, 2);
  t.settle();
  EXPECT_EQ(tcp_peer_now(t.mover), TcpPeer::quiet);
  t.send_bytes(kZero, 2);
  t.settle();
  EXPECT_EQ(tcp_peer_now(t.mover), TcpPeer::zero);
  TcpPair u;
  u.send_bytes(kZero, 3);
  shutdown(u.peer, SHUT_WR);
  u.settle();
  EXPECT_EQ(tcp_peer_now(u.mover), TcpPeer::data) << "3 zero bytes and the end: no announcement";
}

TEST(PreloadForkPeer, AClosedOrResetStreamIsClosed) {
  TcpPair t;
  shutdown(t.peer, SHUT_WR);
  t.settle();
  EXPECT_EQ(tcp_peer_now(t.mover), TcpPeer::closed);
  EXPECT_EQ(tcp_peer_bytes(t.mover), TcpPeer::closed);
  TcpPair u;
  linger l{1, 0};
  setsockopt(u.peer, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(u.peer);
  u.peer = -1;
  u.settle();
  EXPECT_EQ(tcp_peer_now(u.mover), TcpPeer::closed);
  EXPECT_EQ(tcp_peer_bytes(u.mover), TcpPeer::closed);
}

TEST(PreloadForkPeer, APeerThatNeverAnnouncesCostsTheDeadlineAndNoMore) {
  TcpPair t;
  auto start = Clock::now();
  EXPECT_EQ(await_announcement(t.mover, Deadline::in(300)), TcpPeer::quiet);
  auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(290));
  EXPECT_LT(took, milliseconds(300) + rdmacm::test::scaled(milliseconds(500)));
}

TEST(PreloadForkPeer, TheAnnouncementEndsTheWaitWhenItComes) {
  TcpPair t;
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(100));
    send(t.peer, kZero, 2, 0);
    std::this_thread::sleep_for(milliseconds(50));
    send(t.peer, kZero, 2, 0);
  });
  auto start = Clock::now();
  EXPECT_EQ(await_announcement(t.mover, Deadline::in(rdmacm::test::scaled_ms(5000))),
            TcpPeer::zero);
  EXPECT_LT(Clock::now() - start, rdmacm::test::scaled(milliseconds(2000)));
  later.join();
}

TEST(PreloadForkPeer, ToThePassiveSideAnyByteIsData) {
  TcpPair t;
  EXPECT_EQ(tcp_peer_bytes(t.mover), TcpPeer::quiet);
  t.send_bytes(kZero, 1);
  t.settle();
  EXPECT_EQ(tcp_peer_bytes(t.mover), TcpPeer::data) << "a mover sends nothing over TCP";
  EXPECT_EQ(t.readable(), 1u);
}

TEST(PreloadForkPeer, ThePassiveSideWaitsForTheCloseThatConfirmsAMove) {
  TcpPair t;
  std::thread mover([&] {
    std::this_thread::sleep_for(milliseconds(100));
    shutdown(t.peer, SHUT_RDWR);  // what a genuine mover does after its rconnect
  });
  EXPECT_EQ(await_close(t.mover, Deadline::in(rdmacm::test::scaled_ms(5000))), TcpPeer::closed);
  mover.join();

  TcpPair u;
  std::thread talker([&] {
    std::this_thread::sleep_for(milliseconds(100));
    send(u.peer, "x", 1, 0);
  });
  EXPECT_EQ(await_close(u.mover, Deadline::in(rdmacm::test::scaled_ms(5000))), TcpPeer::data);
  talker.join();

  TcpPair v;
  auto start = Clock::now();
  EXPECT_EQ(await_close(v.mover, Deadline::in(200)), TcpPeer::quiet);
  EXPECT_GE(Clock::now() - start, milliseconds(190));
}

sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

sockaddr_in6 v6(const char* ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return a;
}

template <typename A, typename B>
bool same(const A& a, const B& b, socklen_t alen = sizeof(A), socklen_t blen = sizeof(B)) {
  return same_host(reinterpret_cast<const sockaddr*>(&a), alen,
                   reinterpret_cast<const sockaddr*>(&b), blen);
}

TEST(PreloadForkPeer, SameHostComparesAddressesNotPorts) {
  EXPECT_TRUE(same(v4("169.254.1.2", 40000), v4("169.254.1.2", 7471)));
  EXPECT_FALSE(same(v4("169.254.1.2", 7471), v4("169.254.1.3", 7471)));
  EXPECT_TRUE(same(v4("169.254.1.2", 1), v6("::ffff:169.254.1.2", 2)));
  EXPECT_TRUE(same(v6("::ffff:169.254.1.2", 2), v4("169.254.1.2", 1)));
  EXPECT_FALSE(same(v6("::169.254.1.2", 2), v4("169.254.1.2", 1))) << "IPv4-compatible is not mapped";
  EXPECT_TRUE(same(v6("fe80::1", 1), v6("fe80::1", 9)));
  EXPECT_FALSE(same(v6("fe80::1", 1), v6("fe80::2", 1)));
  EXPECT_FALSE(same(v4("169.254.1.2", 1), v4("169.254.1.2", 1), sizeof(sockaddr_in) - 1))
      << "a short address is no address";
  sockaddr_in unix_like = v4("169.254.1.2", 1);
  unix_like.sin_family = AF_UNIX;
  EXPECT_FALSE(same(unix_like, v4("169.254.1.2", 1)));
  EXPECT_FALSE(same_host(nullptr, 0, reinterpret_cast<const sockaddr*>(&unix_like), 16));
}

TEST(PreloadForkPeer, AMappedAddressBecomesTheIpv4AddressItIs) {
  sockaddr_storage st{};
  sockaddr_in6 mapped = v6("::ffff:169.254.1.2", 7471);
  memcpy(&st, &mapped, sizeof mapped);
  socklen_t len = sizeof mapped;
  unmap_v4(&st, &len);
  ASSERT_EQ(st.ss_family, AF_INET);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  auto* four = reinterpret_cast<sockaddr_in*>(&st);
  EXPECT_EQ(ntohs(four->sin_port), 7471);
  EXPECT_TRUE(same(*four, v4("169.254.1.2", 0)));
  sockaddr_in6 plain6 = v6("fe80::1", 7);
  memcpy(&st, &plain6, sizeof plain6);
  len = sizeof plain6;
  unmap_v4(&st, &len);
  EXPECT_EQ(st.ss_family, AF_INET6);
  EXPECT_EQ(len, sizeof(sockaddr_in6));
}

}  // namespace
}  // namespace rspreload
