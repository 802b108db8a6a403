// Datagram rsockets against a hostile peer, without a device: the
// destination table's bound and eviction, the binding rule (a bare claim
// never rebinds a working destination), the checks on UDP and UD headers,
// and a UDP flood of garbage and many sources at a bound socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "rsocket/datagram_dests.h"
#include "rsocket/datagram_header.h"

namespace rdmacm::rsocket {
namespace {

SockAddr addr4(uint32_t ip, uint16_t port) {
  SockAddr a{};
  a.sin.sin_family = AF_INET;
  a.sin.sin_port = htons(port);
  a.sin.sin_addr.s_addr = htonl(ip);
  return a;
}

const DestTable::CanEvict kAny = [](const DatagramDest&) { return true; };

TEST(RsocketDgramDests, BoundedByDefault) {
  DestTable t;
  EXPECT_EQ(t.max_peers(), DestTable::kMaxDests);
  EXPECT_EQ(DestTable::kMaxDests, 1024u);
  for (uint16_t p = 1; p <= 5000; ++p) {
    std::unique_ptr<DatagramDest> evicted;
    ASSERT_NE(t.add(addr4(0x0a000001, p), nullptr, kAny, &evicted), nullptr);
    EXPECT_EQ(evicted != nullptr, p > 1024);
  }
  EXPECT_EQ(t.peers(), 1024u);
  EXPECT_EQ(t.evictions(), 5000u - 1024u);
  // The newest 1024 remain.
  EXPECT_EQ(t.find(addr4(0x0a000001, 5000 - 1024)), nullptr);
  EXPECT_NE(t.find(addr4(0x0a000001, 5000 - 1023)), nullptr);
}

TEST(RsocketDgramDests, EvictsTheLeastRecentlyUsed) {
  DestTable t(3);
  std::unique_ptr<DatagramDest> evicted;
  for (uint16_t p = 1; p <= 3; ++p) t.add(addr4(1, p), nullptr, kAny, &evicted);
  ASSERT_NE(t.find(addr4(1, 1)), nullptr);  // 1 is now the most recent: 2 goes
  ASSERT_NE(t.add(addr4(1, 4), nullptr, kAny, &evicted), nullptr);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(ntohs(evicted->addr.sin.sin_port), 2);
  EXPECT_EQ(t.find(addr4(1, 2)), nullptr);
  EXPECT_EQ(t.peers(), 3u);
}

TEST(RsocketDgramDests, EvictsOnlyWhatItsOwnerLetsGo) {
  DestTable t(3);
  std::unique_ptr<DatagramDest> evicted;
  DatagramDest* in_use = t.add(addr4(1, 1), nullptr, kAny, &evicted);
  t.add(addr4(1, 2), nullptr, kAny, &evicted);
  t.add(addr4(1, 3), nullptr, kAny, &evicted);
  auto not_in_use = [&](const DatagramDest& d) { return &d != in_use; };
  ASSERT_NE(t.add(addr4(1, 4), nullptr, not_in_use, &evicted), nullptr);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(ntohs(evicted->addr.sin.sin_port), 2);  // the oldest, 1, is held
  EXPECT_EQ(t.find(addr4(1, 1)), in_use);
  // None may go: refused, nothing changed.
  evicted.reset();
  auto none = [](const DatagramDest&) { return false; };
  EXPECT_EQ(t.add(addr4(1, 5), nullptr, none, &evicted), nullptr);
  EXPECT_FALSE(evicted);
  EXPECT_EQ(t.peers(), 3u);
  EXPECT_EQ(t.find(addr4(1, 5)), nullptr);
}

TEST(RsocketDgramDests, WorkingPeersOutliveAFloodOfMadeUpSources) {
  DestTable t(4);
  std::unique_ptr<DatagramDest> evicted;
  DatagramDest* working = t.add(addr4(9, 9), nullptr, kAny, &evicted);
  working->ah = reinterpret_cast<ibv_ah*>(1);  // never dereferenced
  for (uint16_t p = 1; p <= 100; ++p) {
    ASSERT_NE(t.add(addr4(1, p), nullptr, kAny, &evicted), nullptr);
    if (evicted) {
      EXPECT_EQ(evicted->ah, nullptr);
    }
  }
  EXPECT_EQ(t.find(addr4(9, 9)), working);
  // All bound: the least recently used of them goes.
  for (uint16_t p = 98; p <= 100; ++p) t.find(addr4(1, p))->ah = reinterpret_cast<ibv_ah*>(1);
  t.find(addr4(9, 9));
  ASSERT_NE(t.add(addr4(2, 1), nullptr, kAny, &evicted), nullptr);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(ntohs(evicted->addr.sin.sin_port), 98);
  evicted->ah = nullptr;
  t.for_each([](DatagramDest& d) { d.ah = nullptr; });
}

TEST(RsocketDgramDests, OwnQpsAreNeitherCountedNorEvicted) {
  DestTable t(2);
  std::unique_ptr<DatagramDest> evicted;
  DatagramDest* self = t.add_self(addr4(7, 7), nullptr);
  EXPECT_TRUE(self->self);
  EXPECT_EQ(t.peers(), 0u);
  for (uint16_t p = 1; p <= 10; ++p)
    ASSERT_NE(t.add(addr4(1, p), nullptr, kAny, &evicted), nullptr);
  EXPECT_EQ(t.find(addr4(7, 7)), self);
  EXPECT_EQ(t.peers(), 2u);
  // A peer at an address that becomes a QP's own is that QP's now.
  DatagramDest* peer = t.find(addr4(1, 10));
  EXPECT_EQ(t.add_self(addr4(1, 10), nullptr), peer);
  EXPECT_TRUE(peer->self);
  EXPECT_EQ(t.peers(), 1u);
}

TEST(RsocketDgramBinding, FirstContactBindsAsUdpWould) {
  PeerBinding b;
  EXPECT_FALSE(b.bound());
  EXPECT_EQ(b.on_claim(100), PeerBinding::Claim::resolve);
  EXPECT_EQ(b.on_heard(100, false), PeerBinding::Heard::none);  // not from the address's host
  EXPECT_EQ(b.on_heard(100, true), PeerBinding::Heard::learn);
  b.bind(100);
  EXPECT_TRUE(b.bound());
  EXPECT_EQ(b.qpn(), 100u);
  EXPECT_FALSE(b.unsettled());
}

TEST(RsocketDgramBinding, ABareClaimNeverRebinds) {
  PeerBinding b;
  b.bind(100);
  EXPECT_EQ(b.on_claim(100), PeerBinding::Claim::none);
  EXPECT_EQ(b.on_claim(666), PeerBinding::Claim::candidate);
  EXPECT_EQ(b.qpn(), 100u);  // still bound to the working QP
  EXPECT_TRUE(b.unsettled());  // sends go over UDP, to the address's owner
  for (int i = 0; i < 1000; ++i) b.on_claim(666);
  EXPECT_EQ(b.qpn(), 100u);
  // A UD message from the claimed QPN but another host proves nothing.
  EXPECT_EQ(b.on_heard(666, false), PeerBinding::Heard::none);
  EXPECT_EQ(b.qpn(), 100u);
  // The bound QP speaks from the address's host: the claim was false.
  EXPECT_EQ(b.on_heard(100, true), PeerBinding::Heard::confirmed);
  EXPECT_EQ(b.qpn(), 100u);
  EXPECT_FALSE(b.unsettled());
  // Once settled, the claimed QPN speaking from the host is no claim.
  EXPECT_EQ(b.on_heard(666, true), PeerBinding::Heard::none);
  EXPECT_EQ(b.qpn(), 100u);
}

TEST(RsocketDgramBinding, RebindsWhenThePeerReresolved) {
  PeerBinding b;
  b.bind(100);
  EXPECT_EQ(b.on_claim(200), PeerBinding::Claim::candidate);
  EXPECT_EQ(b.on_claim(300), PeerBinding::Claim::candidate);  // the latest claim's
  EXPECT_EQ(b.on_heard(200, true), PeerBinding::Heard::none);
  EXPECT_EQ(b.on_heard(300, true), PeerBinding::Heard::rebound);
  EXPECT_EQ(b.qpn(), 300u);
  EXPECT_FALSE(b.unsettled());
}

TEST(RsocketDgramDests, OverUdpWithoutAnAhOrWithACandidate) {
  DatagramDest d;
  EXPECT_TRUE(d.over_udp());
  d.ah = reinterpret_cast<ibv_ah*>(1);  // never dereferenced
  d.binding.bind(5);
  EXPECT_FALSE(d.over_udp());
  d.binding.on_claim(6);
  EXPECT_TRUE(d.over_udp());
}

std::vector<uint8_t> udp_header(uint8_t version, uint8_t op, uint8_t length, uint32_t qpn) {
  wire::DsUdpHeader h{};
  h.tag = htobe32(wire::kDsUdpTag);
  h.version = version;
  h.op = op;
  h.length = length;
  h.qpn = htobe32(qpn);
  std::vector<uint8_t> v(sizeof(h));
  std::memcpy(v.data(), &h, sizeof(h));
  v.resize(length);
  return v;
}

TEST(RsocketDgramHeaders, UdpHeaderChecks) {
  wire::DsUdpHeader out;
  auto v4 = udp_header(4, 0, wire::kDsUdpIpv4HeaderLength, 0x123);
  EXPECT_TRUE(decode_udp_header(v4.data(), v4.size(), AF_INET, &out));
  EXPECT_EQ(out.length, wire::kDsUdpIpv4HeaderLength);
  auto v6 = udp_header(6, 7, wire::kDsUdpIpv6HeaderLength, 0x123);
  EXPECT_TRUE(decode_udp_header(v6.data(), v6.size(), AF_INET6, &out));
  // Short, of either family's length.
  for (size_t n = 0; n < v4.size(); ++n)
    EXPECT_FALSE(decode_udp_header(v4.data(), n, AF_INET, &out)) << n;
  for (size_t n = 0; n < v6.size(); ++n)
    EXPECT_FALSE(decode_udp_header(v6.data(), n, AF_INET6, &out)) << n;
  // The version must be the source's family, the length the version's.
  EXPECT_FALSE(decode_udp_header(v4.data(), v4.size(), AF_INET6, &out));
  EXPECT_FALSE(decode_udp_header(v6.data(), v6.size(), AF_INET, &out));
  auto bad_len = udp_header(4, 0, wire::kDsUdpIpv6HeaderLength, 1);
  EXPECT_FALSE(decode_udp_header(bad_len.data(), bad_len.size(), AF_INET, &out));
  auto bad_version = udp_header(5, 0, wire::kDsUdpIpv4HeaderLength, 1);
  EXPECT_FALSE(decode_udp_header(bad_version.data(), bad_version.size(), AF_INET, &out));
  auto bad_tag = v4;
  bad_tag[0] ^= 1;
  EXPECT_FALSE(decode_udp_header(bad_tag.data(), bad_tag.size(), AF_INET, &out));
  // Anything else: every byte value in each place of a v4 header.
  for (size_t i = 0; i < v4.size(); ++i) {
    for (int x = 0; x < 256; ++x) {
      auto m = v4;
      m[i] = static_cast<uint8_t>(x);
      if (decode_udp_header(m.data(), m.size(), AF_INET, &out)) {
        EXPECT_LE(out.length, m.size());
      }
    }
  }
}

TEST(RsocketDgramHeaders, UdHeaderChecks) {
  SockAddr a4 = addr4(0x0a000001, 9), a6{};
  a6.sin6.sin6_family = AF_INET6;
  a6.sin6.sin6_port = htons(9);
  a6.sin6.sin6_addr = in6addr_loopback;
  for (const SockAddr& a : {a4, a6}) {
    wire::DsHeader h = encode_header(a);
    uint8_t msg[wire::kDsIpv6HeaderLength + 4] = {};
    std::memcpy(msg, &h, h.length);
    EXPECT_TRUE(valid_header(msg, h.length));
    EXPECT_TRUE(valid_header(msg, sizeof(msg)));
    for (uint32_t n = 0; n < h.length; ++n) EXPECT_FALSE(valid_header(msg, n)) << n;
    SockAddr back = decode_header(h);
    EXPECT_EQ(std::memcmp(&back, &a, sizeof(a)), 0);
    msg[1] = static_cast<uint8_t>(h.length == 8 ? 24 : 8);  // the other family's length
    EXPECT_FALSE(valid_header(msg, sizeof(msg)));
    msg[1] = h.length;
    msg[0] = 5;
    EXPECT_FALSE(valid_header(msg, sizeof(msg)));
  }
}

// No device here: a protocol datagram from a new source finds no QP to
// answer from and is dropped; the point is that nothing well-formed or not stops the
// socket or the service (the next socket still binds and closes).
TEST(RsocketDgramFlood, GarbageAndManySourcesAreDropped) {
  int fd = ::rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0) << strerror(errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(rbind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
  socklen_t len = sizeof(a);
  ASSERT_EQ(rgetsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::vector<int> senders;
  for (int i = 0; i < 64; ++i) senders.push_back(socket(AF_INET, SOCK_DGRAM, 0));
  auto good = udp_header(4, 0, wire::kDsUdpIpv4HeaderLength, 0x1234);
  good.resize(good.size() + 100, 'x');
  auto bad_qpn = udp_header(4, 0, wire::kDsUdpIpv4HeaderLength, 1);
  auto bad_op = udp_header(4, 3, wire::kDsUdpIpv4HeaderLength, 0x1234);
  for (int round = 0; round < 20; ++round) {
    for (int s : senders) {
      // Garbage after the protocol's tag: the protocol's, malformed (without
      // the tag a datagram is the application's: rsocket_dgram_plain_test).
      uint8_t junk[64];
      for (auto& b : junk) b = static_cast<uint8_t>(rand());
      uint32_t tag = htobe32(wire::kDsUdpTag);
      std::memcpy(junk, &tag, sizeof(tag));
      for (auto* m : {&good, &bad_qpn, &bad_op}) {
        sendto(s, m->data(), m->size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
      }
      sendto(s, junk, sizeof(tag) + static_cast<size_t>(round), 0, reinterpret_cast<sockaddr*>(&a),
             sizeof(a));
    }
  }
  for (int s : senders) close(s);
  char buf[16];
  errno = 0;
  EXPECT_EQ(rrecvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EWOULDBLOCK);
  EXPECT_EQ(rclose(fd), 0);
  int fd2 = ::rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd2, 0);
  a.sin_port = 0;
  EXPECT_EQ(rbind(fd2, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(rclose(fd2), 0);
}

}  // namespace
}  // namespace rdmacm::rsocket
