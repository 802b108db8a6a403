// Datagram rsockets at the port's MTU, on the fake device: a datagram whose
// UD message (our DsHeader and the payload) is longer than the port's active
// MTU fails at once with EMSGSIZE from rsendto, rsend and rsendmsg, whether
// it would go over UD or (first contact) over UDP; one that fits goes out
// whole. rdma-core 44 checks nothing: the device drops such a message
// without a word (IB spec C10-93.1.1; rxe completes it successfully), so
// its sender never learns and an echo waits for ever (tests/rxe/
// rsocket_dgram.sh measures both on rxe). A datagram a peer sends us over
// UDP that our QP cannot forward as one message is dropped, not posted.
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "device_fixture.h"
#include "rsocket/datagram_header.h"
#include "rsocket/protocol.h"

namespace rdmacm::testing {
namespace {

namespace wire = rsocket::wire;

struct MtuCase {
  ibv_mtu mtu;
  int family;
  size_t max;  // the largest payload: min(slot, MTU) less our header
};

void PrintTo(const MtuCase& c, std::ostream* os) {
  *os << "MTU " << (128 << c.mtu) << (c.family == AF_INET ? " IPv4" : " IPv6") << ", at most "
      << c.max << " bytes";
}

std::string name_of(const ::testing::TestParamInfo<MtuCase>& info) {
  return "mtu" + std::to_string(128 << info.param.mtu) +
         (info.param.family == AF_INET ? "_ipv4" : "_ipv6");
}

const MtuCase kCases[] = {
    {IBV_MTU_256, AF_INET, 256 - wire::kDsIpv4HeaderLength},
    {IBV_MTU_1024, AF_INET, 1024 - wire::kDsIpv4HeaderLength},   // rxe on a 1500-byte Ethernet
    {IBV_MTU_1024, AF_INET6, 1024 - wire::kDsIpv6HeaderLength},
    {IBV_MTU_2048, AF_INET, wire::kDsSlotSize - wire::kDsIpv4HeaderLength},
    {IBV_MTU_4096, AF_INET6, wire::kDsSlotSize - wire::kDsIpv6HeaderLength},  // the slot bounds
};

rsocket::SockAddr loopback(int family) {
  rsocket::SockAddr a{};
  a.sa.sa_family = static_cast<sa_family_t>(family);
  if (family == AF_INET)
    a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  else
    a.sin6.sin6_addr = in6addr_loopback;
  return a;
}

socklen_t len_of(int family) { return rsocket::sockaddr_len(static_cast<sa_family_t>(family)); }

class RsocketDgramMtu : public DeviceTest, public ::testing::WithParamInterface<MtuCase> {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DeviceTest::SetUp());
    fake_set_active_mtu(GetParam().mtu);
    family = GetParam().family;
    max = GetParam().max;
    hdr = family == AF_INET ? wire::kDsIpv4HeaderLength : wire::kDsIpv6HeaderLength;
    payload.resize(wire::kDsSlotSize + 1);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
    fd = ::rsocket(family, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0) << strerror(errno);
    rsocket::SockAddr any = loopback(family);
    ASSERT_EQ(rbind(fd, &any.sa, len_of(family)), 0) << strerror(errno);
    socklen_t len = sizeof(self);
    ASSERT_EQ(rgetsockname(fd, &self.sa, &len), 0);
    // The first send to ourselves makes the socket's QP (the fake's last),
    // and goes over UD to the QP's own address handle.
    ASSERT_EQ(rsendto(fd, payload.data(), 16, 0, &self.sa, len_of(family)), 16) << strerror(errno);
    qp = fake_last_qp();
    ASSERT_NE(qp, nullptr);
    ASSERT_EQ(take().size(), 1u);
  }
  void TearDown() override {
    if (fd >= 0) {
      EXPECT_EQ(rclose(fd), 0);  // waits for every send to complete
    }
    fake_set_active_mtu(IBV_MTU_4096);
    DeviceTest::TearDown();
  }

  // The sends posted since the last call, each completed (as the device
  // would), so that rclose finds none outstanding.
  std::vector<FakeSend> take() {
    std::vector<FakeSend> posted = fake_take_posted(qp);
    while (fake_complete_send(qp, IBV_WC_SUCCESS)) {
    }
    return posted;
  }

  // A kernel UDP socket on the loopback address, and where it is.
  void udp_peer(int* fd_out, rsocket::SockAddr* at) {
    int peer = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(peer, 0);
    *fd_out = peer;
    *at = loopback(family);
    ASSERT_EQ(::bind(peer, &at->sa, len_of(family)), 0);
    socklen_t len = sizeof(*at);
    ASSERT_EQ(::getsockname(peer, &at->sa, &len), 0);
  }

  // One UD message of our header and n payload bytes, as posted.
  void expect_message(const std::vector<FakeSend>& posted, size_t n) {
    ASSERT_EQ(posted.size(), 1u);
    const std::vector<uint8_t>& m = posted[0].data;
    ASSERT_EQ(m.size(), hdr + n);
    EXPECT_EQ(m[offsetof(wire::DsHeader, version)], family == AF_INET ? 4 : 6);
    EXPECT_EQ(m[offsetof(wire::DsHeader, length)], hdr);
    EXPECT_TRUE(std::equal(m.begin() + hdr, m.end(), payload.begin()));
  }

  int family = AF_INET;
  size_t max = 0;
  size_t hdr = 0;
  std::vector<uint8_t> payload;
  int fd = -1;
  rsocket::SockAddr self{};
  ibv_qp* qp = nullptr;
};

#define EXPECT_EMSGSIZE(call) EXPECT_FAILS_WITH(call, EMSGSIZE)

TEST_P(RsocketDgramMtu, SendtoCarriesUpToTheMtuAndRefusesMore) {
  for (size_t n : {max - 1, max}) {
    ASSERT_EQ(rsendto(fd, payload.data(), n, 0, &self.sa, len_of(family)), static_cast<ssize_t>(n))
        << n << ": " << strerror(errno);
    expect_message(take(), n);
  }
  for (size_t n : {max + 1, max + 2, size_t{wire::kDsSlotSize}}) {
    EXPECT_EMSGSIZE(rsendto(fd, payload.data(), n, 0, &self.sa, len_of(family)));
    EXPECT_EMSGSIZE(rsendto(fd, payload.data(), n, MSG_DONTWAIT, &self.sa, len_of(family)));
  }
  EXPECT_TRUE(take().empty()) << "a datagram refused was posted";
}

TEST_P(RsocketDgramMtu, ConnectedSendAndVectorsTheSame) {
  ASSERT_EQ(rconnect(fd, &self.sa, len_of(family)), 0) << strerror(errno);
  ASSERT_EQ(rsend(fd, payload.data(), max, 0), static_cast<ssize_t>(max)) << strerror(errno);
  expect_message(take(), max);
  EXPECT_EMSGSIZE(rsend(fd, payload.data(), max + 1, 0));
  EXPECT_EMSGSIZE(rwrite(fd, payload.data(), max + 1));
  // Two buffers of one datagram: max in all fits, one byte more does not.
  iovec iov[2] = {{payload.data(), max / 2}, {payload.data() + max / 2, max - max / 2}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  ASSERT_EQ(rsendmsg(fd, &msg, 0), static_cast<ssize_t>(max)) << strerror(errno);
  expect_message(take(), max);
  iov[1].iov_len += 1;
  EXPECT_EMSGSIZE(rsendmsg(fd, &msg, 0));
  EXPECT_EMSGSIZE(rwritev(fd, iov, 2));
  EXPECT_TRUE(take().empty()) << "a datagram refused was posted";
}

// A peer whose QP we do not know yet gets its datagrams over UDP, which its
// service forwards as one UD message: the same bound holds.
TEST_P(RsocketDgramMtu, OverUdpTheSameBound) {
  int peer = -1;
  rsocket::SockAddr at{};
  ASSERT_NO_FATAL_FAILURE(udp_peer(&peer, &at));
  size_t udp_hdr = family == AF_INET ? wire::kDsUdpIpv4HeaderLength : wire::kDsUdpIpv6HeaderLength;
  EXPECT_EMSGSIZE(rsendto(fd, payload.data(), max + 1, 0, &at.sa, len_of(family)));
  ASSERT_EQ(rsendto(fd, payload.data(), max, 0, &at.sa, len_of(family)), static_cast<ssize_t>(max))
      << strerror(errno);
  // The first datagram to arrive is the one that fits (loopback keeps order).
  std::vector<uint8_t> got(wire::kDsSlotSize + 64);
  pollfd p{peer, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  EXPECT_EQ(::recv(peer, got.data(), got.size(), 0), static_cast<ssize_t>(udp_hdr + max));
  EXPECT_TRUE(take().empty()) << "nothing goes over UD to a peer not known yet";
  ::close(peer);
}

// A peer that does not check (rdma-core 44) sends us over UDP a payload our
// QP cannot forward to itself as one message: dropped, where a UD send would
// have been dropped by the device unseen. The next one that fits is forwarded.
TEST_P(RsocketDgramMtu, ForwardDropsWhatOneMessageCannotHold) {
  int peer = -1;
  rsocket::SockAddr at{};
  ASSERT_NO_FATAL_FAILURE(udp_peer(&peer, &at));
  rsocket::SockAddr key;
  ASSERT_EQ(rsocket::to_key(&at.sa, len_of(family), &key), 0);
  wire::DsUdpHeader h = rsocket::encode_udp_header(rsocket::encode_header(key), wire::Op::data, 0x1234);
  for (size_t n : {max + 1, max}) {
    iovec iov[2] = {{&h, h.length}, {payload.data(), n}};
    msghdr msg{};
    msg.msg_name = &self;
    msg.msg_namelen = len_of(family);
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    ASSERT_EQ(::sendmsg(peer, &msg, 0), static_cast<ssize_t>(h.length + n));
  }
  // The service takes them in order: once the second is posted, the first
  // was dropped.
  std::vector<FakeSend> posted;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (posted.empty() && std::chrono::steady_clock::now() < end) {
    posted = take();
    if (posted.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  expect_message(posted, max);
  ::close(peer);
}

INSTANTIATE_TEST_SUITE_P(Ports, RsocketDgramMtu, ::testing::ValuesIn(kCases), name_of);

}  // namespace
}  // namespace rdmacm::testing
