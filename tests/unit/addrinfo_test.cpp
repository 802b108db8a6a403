// rdma_getaddrinfo without a kernel: translation of hints and results,
// rdma-core's return conventions, and misuse.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include <cerrno>

namespace {

TEST(AddrInfo, NumericIpv4Destination) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.7", "7471", &hints, &res), 0);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->ai_family, AF_INET);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  EXPECT_EQ(res->ai_flags, 0);
  EXPECT_EQ(res->ai_src_len, 0u);
  ASSERT_EQ(res->ai_dst_len, sizeof(sockaddr_in));
  auto* sin = reinterpret_cast<sockaddr_in*>(res->ai_dst_addr);
  EXPECT_EQ(ntohs(sin->sin_port), 7471);
  EXPECT_EQ(res->ai_next, nullptr);
  rdma_freeaddrinfo(res);
}

TEST(AddrInfo, PassiveGivesSourceAddress) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_UDP;
  hints.ai_qp_type = IBV_QPT_UD;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, "7174", &hints, &res), 0);
  EXPECT_EQ(res->ai_flags, RAI_PASSIVE);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_UDP);
  EXPECT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_dst_addr, nullptr);
  rdma_freeaddrinfo(res);
}

TEST(AddrInfo, AfIbFromNumericIpv6) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
  hints.ai_family = AF_IB;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("fe80::1", "18515", &hints, &res), 0);
  EXPECT_EQ(res->ai_family, AF_IB);
  ASSERT_EQ(res->ai_dst_len, sizeof(sockaddr_ib));
  auto* sib = reinterpret_cast<sockaddr_ib*>(res->ai_dst_addr);
  EXPECT_EQ(sib->sib_family, AF_IB);
  EXPECT_EQ(be64toh(sib->sib_sid), (uint64_t{RDMA_PS_TCP} << 16) + 18515);
  EXPECT_EQ(sib->sib_sid_mask, htobe64(RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK));
  EXPECT_EQ(sib->sib_addr.sib_raw[0], 0xfe);
  rdma_freeaddrinfo(res);
}

TEST(AddrInfo, ResolverFailureReturnsEaiCode) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  rdma_addrinfo* res = nullptr;
  EXPECT_EQ(rdma_getaddrinfo("not-a-number", nullptr, &hints, &res), EAI_NONAME);
  EXPECT_EQ(res, nullptr);
  // As in rdma-core, the resolver's failure comes before any look at res.
  EXPECT_EQ(rdma_getaddrinfo("not-a-number", nullptr, &hints, nullptr), EAI_NONAME);
}

TEST(AddrInfo, Misuse) {
  rdma_addrinfo* res = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_getaddrinfo(nullptr, nullptr, nullptr, &res), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_getaddrinfo("127.0.0.1", nullptr, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_addrinfo forged{};
  errno = 0;
  rdma_freeaddrinfo(&forged);  // not ours: refused, not freed
  EXPECT_EQ(errno, EINVAL);
  rdma_freeaddrinfo(nullptr);
}

// rdma-core copies ai_src_len/ai_dst_len bytes from the hints' addresses
// whatever they are: a length without an address, or one past any sockaddr,
// crashes it. Ours refuses both, with or without a node to resolve.
TEST(AddrInfo, HintAddressLengthsAreChecked) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  for (const char* node : {static_cast<const char*>(nullptr), "127.0.0.1"}) {
    for (bool src : {true, false}) {
      for (socklen_t len : {socklen_t{sizeof(sockaddr_in)}, socklen_t{sizeof(sockaddr_storage) + 1},
                            socklen_t{0x7fffffff}}) {
        for (bool with_addr : {false, true}) {
          if (with_addr && len == sizeof(sockaddr_in)) continue;  // valid
          rdma_addrinfo hints{};
          (src ? hints.ai_src_len : hints.ai_dst_len) = len;
          (src ? hints.ai_src_addr : hints.ai_dst_addr) =
              with_addr ? reinterpret_cast<sockaddr*>(&sin) : nullptr;
          rdma_addrinfo* res = nullptr;
          errno = 0;
          EXPECT_EQ(rdma_getaddrinfo(node, nullptr, &hints, &res), -1)
              << (node ? node : "no node") << (src ? " src " : " dst ") << len;
          EXPECT_EQ(errno, EINVAL);
          EXPECT_EQ(res, nullptr);
        }
      }
    }
  }
}

TEST(AddrInfo, HintsOnlyCopiesAddresses) {
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(9);
  rdma_addrinfo hints{};
  hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
  hints.ai_dst_len = sizeof(dst);
  hints.ai_port_space = RDMA_PS_IB;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &hints, &res), 0);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_IB);
  ASSERT_EQ(res->ai_dst_len, sizeof(dst));
  EXPECT_NE(res->ai_dst_addr, hints.ai_dst_addr);  // a copy
  EXPECT_EQ(memcmp(res->ai_dst_addr, &dst, sizeof(dst)), 0);
  rdma_freeaddrinfo(res);
}

}  // namespace
