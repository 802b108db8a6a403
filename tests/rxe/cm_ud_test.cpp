// Unreliable datagrams through the kernel's rdma_cm (RDMA_PS_UDP and
// RDMA_PS_IPOIB ids; datagram rsockets are tested elsewhere:
// tests/unit/rsocket_dgram_test.cpp, tests/rxe/rsocket_dgram.sh): SIDR
// connect/accept giving address handles, UD sends with rdma_post_ud_send, what
// RDMA_PS_IPOIB ids can do on RoCE, and multicast groups (join from bound and
// resolved ids, send-only join, leave, attach failures, misuse).
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cm_helpers.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using namespace std::chrono_literals;

constexpr size_t kGrh = 40;  // UD receives start with the global route header

ibv_qp_init_attr ud_qp_attr() {
  ibv_qp_init_attr attr{};
  attr.qp_type = IBV_QPT_UD;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 8;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.sq_sig_all = 1;
  return attr;
}

TEST(CmUd, SidrExchangeAndUdTraffic) {
  Pair pair;
  ASSERT_TRUE(pair.setup(RDMA_PS_UDP));
  EXPECT_EQ(pair.client->qp_type, IBV_QPT_UD);
  ibv_qp_init_attr attr = ud_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0) << strerror(errno);
  ibv_qp_attr qa;
  ibv_qp_init_attr qia;
  ASSERT_EQ(ibv_query_qp(pair.client->qp, &qa, IBV_QP_STATE | IBV_QP_QKEY, &qia), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS) << "UD QPs are ready at once";
  EXPECT_EQ(qa.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));

  const char hi[] = "sidr";
  rdma_conn_param cp{};
  cp.private_data = hi;
  cp.private_data_len = sizeof(hi);
  ASSERT_EQ(rdma_connect(pair.client, &cp), 0) << strerror(errno);

  rdma_cm_event* req = nullptr;
  ASSERT_TRUE(next_event_is(pair.server_ch, RDMA_CM_EVENT_CONNECT_REQUEST, &req));
  pair.server = req->id;
  EXPECT_EQ(pair.server->qp_type, IBV_QPT_UD);
  ASSERT_NE(req->param.ud.private_data, nullptr);
  EXPECT_STREQ(static_cast<const char*>(req->param.ud.private_data), hi);
  attr = ud_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.server, nullptr, &attr), 0) << strerror(errno);
  char buf[kGrh + 64] = {};
  ibv_mr* mr = rdma_reg_msgs(pair.server, buf, sizeof(buf));
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(rdma_post_recv(pair.server, nullptr, buf, sizeof(buf), mr), 0);
  rdma_conn_param ap{};
  ap.qp_num = pair.server->qp->qp_num;
  ASSERT_EQ(rdma_accept(pair.server, &ap), 0) << strerror(errno);
  rdma_ack_cm_event(req);

  rdma_cm_event* est = nullptr;
  ASSERT_TRUE(next_event_is(pair.client_ch, RDMA_CM_EVENT_ESTABLISHED, &est));
  rdma_ud_param ud = est->param.ud;
  EXPECT_EQ(ud.qp_num, pair.server->qp->qp_num);
  EXPECT_EQ(ud.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  EXPECT_TRUE(ud.ah_attr.is_global) << "RoCE address handles carry a GRH";
  rdma_ack_cm_event(est);

  ibv_ah* ah = ibv_create_ah(pair.client->pd, &ud.ah_attr);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  char msg[] = "datagram";
  ibv_mr* smr = rdma_reg_msgs(pair.client, msg, sizeof(msg));
  ASSERT_EQ(rdma_post_ud_send(pair.client, nullptr, msg, sizeof(msg), smr, 0, ah, ud.qp_num), 0);
  ibv_wc wc;
  ASSERT_TRUE(poll_one(pair.client->send_cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_TRUE(poll_one(pair.server->recv_cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, kGrh + sizeof(msg));
  EXPECT_STREQ(buf + kGrh, msg);
  ibv_destroy_ah(ah);
  rdma_dereg_mr(smr);
  rdma_dereg_mr(mr);
  pair.teardown();
}

// RDMA_PS_IPOIB ids are UD ids, but the kernel (cma_acquire_dev_by_src_ip,
// cma_ib_acquire_dev) refuses to attach them to a device whose netdev is not
// InfiniBand: on RoCE they can bind and listen only on the wildcard address,
// binding to the device's address fails with EINVAL and address resolution
// ends in ADDR_ERROR with status -EINVAL. So no SIDR exchange (and no UD
// traffic) is possible for them on rxe; both libraries pass this through.
TEST(CmUd, IpoibIdsCannotUseARoceDevice) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* client = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &listener, nullptr, RDMA_PS_IPOIB), 0) << strerror(errno);
  ASSERT_EQ(rdma_create_id(ch, &client, nullptr, RDMA_PS_IPOIB), 0) << strerror(errno);
  EXPECT_EQ(listener->qp_type, IBV_QPT_UD);
  EXPECT_EQ(listener->ps, RDMA_PS_IPOIB);

  sockaddr_in addr = device_addr(0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(listener, sa(&addr)), -1) << "bound to a RoCE device";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(listener->verbs, nullptr);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  ASSERT_EQ(rdma_bind_addr(listener, sa(&any)), 0) << "the id is reusable: " << strerror(errno);
  ASSERT_EQ(rdma_listen(listener, 1), 0) << strerror(errno);

  addr.sin_port = rdma_get_src_port(listener);
  ASSERT_EQ(rdma_resolve_addr(client, nullptr, sa(&addr), 2000), 0) << strerror(errno);
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch, RDMA_CM_EVENT_ADDR_ERROR, &ev));
  EXPECT_EQ(ev->id, client);
  EXPECT_EQ(ev->status, -EINVAL);
  rdma_ack_cm_event(ev);
  EXPECT_EQ(client->verbs, nullptr) << "no device for the id";
  if (!reference()) {  // rdma-core dereferences the missing device here
    ibv_qp_init_attr attr = ud_qp_attr();
    errno = 0;
    EXPECT_EQ(rdma_create_qp(client, nullptr, &attr), -1);
    EXPECT_EQ(errno, EINVAL);
    errno = 0;
    EXPECT_EQ(rdma_resolve_route(client, 2000), -1) << "no address, no route";
    EXPECT_EQ(errno, EINVAL);
  }
  EXPECT_EQ(rdma_destroy_id(client), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  rdma_destroy_event_channel(ch);
}

class Multicast : public ::testing::Test {
 protected:
  void SetUp() override {
    ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr);
  }
  void TearDown() override {
    if (receiver) members.push_back(receiver);
    if (sender) members.push_back(sender);
    if (resolved) members.push_back(resolved);
    for (rdma_cm_id* id : members) {
      if (!id) continue;
      if (id->qp) rdma_destroy_qp(id);
      EXPECT_EQ(rdma_destroy_id(id), 0);
    }
    rdma_destroy_event_channel(ch);
  }
  // A UDP id bound to the device (by its IPv4 or IPv6 address) with a UD QP.
  rdma_cm_id* make_member(bool ipv6 = false) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), 0);
    sockaddr_in addr = device_addr(0);
    sockaddr_in6 addr6 = device_addr6(0);
    EXPECT_EQ(rdma_bind_addr(id, ipv6 ? sa(&addr6) : sa(&addr)), 0) << strerror(errno);
    ibv_qp_init_attr attr = ud_qp_attr();
    EXPECT_EQ(rdma_create_qp(id, nullptr, &attr), 0) << strerror(errno);
    return id;
  }
  // A UDP id that is never bound: rdma_resolve_addr from src (or, without
  // one, from the address the routing table picks) to the group gives it
  // the device, the documented way to join from an unbound id.
  rdma_cm_id* resolve_member(const sockaddr_in& group, const sockaddr_in* src) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), 0);
    if (!id) return nullptr;
    sockaddr_in g = group, s = src ? *src : sockaddr_in{};
    EXPECT_EQ(rdma_resolve_addr(id, src ? sa(&s) : nullptr, sa(&g), 2000), 0) << strerror(errno);
    EXPECT_TRUE(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT_NE(id->verbs, nullptr);
    return id;
  }
  static sockaddr_in group(const char* ip) {
    sockaddr_in g{};
    g.sin_family = AF_INET;
    inet_pton(AF_INET, ip, &g.sin_addr);
    return g;
  }

  rdma_event_channel* ch = nullptr;
  rdma_cm_id* receiver = nullptr;
  rdma_cm_id* sender = nullptr;
  rdma_cm_id* resolved = nullptr;
  std::vector<rdma_cm_id*> members;  // more ids for TearDown to destroy
};

// One send reaches two receivers: one bound to the device, one never bound
// but resolved to the group address with no source (the routing table picks
// the device). Only this test sends to a group: rxe takes about 50 s to
// destroy a QP that sent multicast, so rxe.basics runs it in the background,
// on each library at once: each has a group of its own.
TEST_F(Multicast, JoinSendReceiveAndLeave) {
  receiver = make_member();
  sender = make_member();
  ASSERT_TRUE(receiver && sender && receiver->qp && sender->qp);
  sockaddr_in g = group(std::getenv("RDMACM_REFERENCE") ? "239.1.3.3" : "239.1.2.3");
  resolved = resolve_member(g, nullptr);
  ASSERT_NE(resolved, nullptr);
  ibv_qp_init_attr attr = ud_qp_attr();
  ASSERT_EQ(rdma_create_qp(resolved, nullptr, &attr), 0) << strerror(errno);
  ASSERT_EQ(rdma_join_multicast(resolved, sa(&g), nullptr), 0) << strerror(errno);
  ASSERT_TRUE(expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN));
  int ctx_r = 1, ctx_s = 2;
  ASSERT_EQ(rdma_join_multicast(receiver, sa(&g), &ctx_r), 0) << strerror(errno);
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch, RDMA_CM_EVENT_MULTICAST_JOIN, &ev));
  EXPECT_EQ(ev->id, receiver);
  EXPECT_EQ(ev->param.ud.private_data, &ctx_r) << "the join's context comes back";
  EXPECT_EQ(ev->param.ud.qp_num, 0xFFFFFFu);
  rdma_ack_cm_event(ev);

  rdma_cm_join_mc_attr_ex mc{};
  mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  mc.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
  mc.addr = sa(&g);
  ASSERT_EQ(rdma_join_multicast_ex(sender, &mc, &ctx_s), 0) << strerror(errno);
  ASSERT_TRUE(next_event_is(ch, RDMA_CM_EVENT_MULTICAST_JOIN, &ev));
  EXPECT_EQ(ev->id, sender);
  rdma_ud_param ud = ev->param.ud;
  rdma_ack_cm_event(ev);

  char buf[kGrh + 32] = {};
  ibv_mr* mr = rdma_reg_msgs(receiver, buf, sizeof(buf));
  ASSERT_EQ(rdma_post_recv(receiver, nullptr, buf, sizeof(buf), mr), 0);
  char buf2[kGrh + 32] = {};
  ibv_mr* mr2 = rdma_reg_msgs(resolved, buf2, sizeof(buf2));
  ASSERT_EQ(rdma_post_recv(resolved, nullptr, buf2, sizeof(buf2), mr2), 0);
  ibv_ah* ah = ibv_create_ah(sender->pd, &ud.ah_attr);
  ASSERT_NE(ah, nullptr);
  char msg[] = "to the group";
  ibv_mr* smr = rdma_reg_msgs(sender, msg, sizeof(msg));
  ASSERT_EQ(rdma_post_ud_send(sender, nullptr, msg, sizeof(msg), smr, 0, ah, ud.qp_num), 0);
  ibv_wc wc;
  ASSERT_TRUE(poll_one(sender->send_cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_TRUE(poll_one(receiver->recv_cq, &wc)) << "the receiver's QP was attached";
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(buf + kGrh, msg);
  ASSERT_TRUE(poll_one(resolved->recv_cq, &wc)) << "the resolved member's QP was attached";
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, kGrh + sizeof(msg));
  EXPECT_STREQ(buf2 + kGrh, msg);

  EXPECT_EQ(rdma_leave_multicast(resolved, sa(&g)), 0) << strerror(errno);
  EXPECT_EQ(rdma_leave_multicast(receiver, sa(&g)), 0) << strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_leave_multicast(receiver, sa(&g)), -1) << "left already";
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  EXPECT_EQ(rdma_leave_multicast(sender, sa(&g)), 0) << strerror(errno);
  ibv_destroy_ah(ah);
  rdma_dereg_mr(smr);
  rdma_dereg_mr(mr);
  rdma_dereg_mr(mr2);
}

TEST_F(Multicast, Ipv6GroupOnRoceV2IsRefusedByTheKernel) {
  // Linux 6.1 rejects IPv6 groups on RoCEv2 (rxe) with ENOTSUPP (524); the
  // error must come back cleanly, as with rdma-core.
  if (device_addr6().sin6_family != AF_INET6) GTEST_SKIP() << "no IPv6 on the netdev";
  receiver = make_member(true);
  sockaddr_in6 g{};
  g.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "ff0e::1:2", &g.sin6_addr);
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(receiver, sa(&g), nullptr), -1);
  EXPECT_EQ(errno, 524);
  errno = 0;
  EXPECT_EQ(rdma_leave_multicast(receiver, sa(&g)), -1) << "a failed join leaves no group";
  EXPECT_EQ(errno, EADDRNOTAVAIL);
}

// A join needs a device: on an id that is neither bound nor resolved the
// kernel refuses it (EINVAL) in both libraries and no group is left behind.
// Resolving the group address from the device's address (mckey's flow with
// a source) binds the id; the join then works, with or without a QP.
TEST_F(Multicast, UnboundIdResolvesTheGroupFirst) {
  sockaddr_in g = group("239.1.2.6");
  ASSERT_EQ(rdma_create_id(ch, &resolved, nullptr, RDMA_PS_UDP), 0);
  int ctx = 6;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(resolved, sa(&g), &ctx), -1) << "no device yet";
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_leave_multicast(resolved, sa(&g)), -1) << "the failed join left no group";
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  EXPECT_EQ(wait_event(ch, 200), nullptr) << "no event for a refused join";
  EXPECT_EQ(rdma_destroy_id(resolved), 0);
  resolved = nullptr;

  sockaddr_in src = device_addr(0);
  resolved = resolve_member(g, &src);
  ASSERT_NE(resolved, nullptr);
  auto* local = reinterpret_cast<sockaddr_in*>(rdma_get_local_addr(resolved));
  EXPECT_EQ(local->sin_addr.s_addr, src.sin_addr.s_addr);
  ibv_qp_init_attr attr = ud_qp_attr();
  ASSERT_EQ(rdma_create_qp(resolved, nullptr, &attr), 0) << strerror(errno);
  ASSERT_EQ(rdma_join_multicast(resolved, sa(&g), &ctx), 0) << strerror(errno);
  rdma_cm_event* ev = nullptr;
  ASSERT_TRUE(next_event_is(ch, RDMA_CM_EVENT_MULTICAST_JOIN, &ev));
  EXPECT_EQ(ev->id, resolved);
  EXPECT_EQ(ev->param.ud.private_data, &ctx);
  EXPECT_EQ(ev->param.ud.qp_num, 0xFFFFFFu);
  EXPECT_EQ(ev->param.ud.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  EXPECT_TRUE(ev->param.ud.ah_attr.is_global);
  char mgid[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, ev->param.ud.ah_attr.grh.dgid.raw, mgid, sizeof(mgid));
  EXPECT_STREQ(mgid, "::ffff:239.1.2.6") << "RoCE maps an IPv4 group into its GID";
  rdma_ack_cm_event(ev);
  EXPECT_EQ(rdma_leave_multicast(resolved, sa(&g)), 0) << strerror(errno);
}

// The library attaches the id's QP on MULTICAST_JOIN; when that fails the
// application gets MULTICAST_ERROR instead. rxe attaches at most
// max_mcast_qp_attach (56) QPs to a group, so the next member's attach fails
// with ENOMEM. rdma-core reports it as status -1 with errno set (not -errno).
// No traffic: nothing here sends, so the QPs go away at once.
TEST_F(Multicast, AttachFailureIsReportedAsMulticastError) {
  receiver = make_member();
  ASSERT_TRUE(receiver && receiver->qp);
  ibv_device_attr dev{};
  ASSERT_EQ(ibv_query_device(receiver->verbs, &dev), 0);
  ASSERT_GT(dev.max_mcast_qp_attach, 0);
  ASSERT_LT(dev.max_mcast_qp_attach, 1000) << "too many members to fill the group";
  sockaddr_in g = group("239.1.2.7");
  members.push_back(receiver);
  receiver = nullptr;  // in members from here on
  int ctx = 7;
  rdma_cm_event* ev = nullptr;
  for (int i = 0; i <= dev.max_mcast_qp_attach && !HasFailure(); ++i) {
    rdma_cm_id* id = i ? make_member() : members[0];
    if (i) members.push_back(id);
    ASSERT_TRUE(id && id->qp);
    ASSERT_EQ(rdma_join_multicast(id, sa(&g), &ctx), 0) << strerror(errno);
    if (i < dev.max_mcast_qp_attach) {
      EXPECT_TRUE(expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN)) << "member " << i;
      continue;
    }
    errno = 0;
    ASSERT_TRUE(next_event_is(ch, RDMA_CM_EVENT_MULTICAST_ERROR, &ev));
    EXPECT_EQ(ev->id, id);
    EXPECT_EQ(ev->status, -1);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(ev->param.ud.private_data, &ctx);
    rdma_ack_cm_event(ev);
    // The kernel joined; the group is the application's to leave.
    EXPECT_EQ(rdma_leave_multicast(id, sa(&g)), 0) << strerror(errno);
  }
  for (rdma_cm_id* id : members) rdma_leave_multicast(id, sa(&g));  // the last left already
}

TEST_F(Multicast, DestroyWhileJoined) {
  receiver = make_member();
  sockaddr_in g = group("239.1.2.5");
  ASSERT_EQ(rdma_join_multicast(receiver, sa(&g), nullptr), 0) << strerror(errno);
  EXPECT_TRUE(expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN));
  // Destroying the id (after its QP) leaves the group with it: no hang.
  rdma_destroy_qp(receiver);
  EXPECT_EQ(rdma_destroy_id(receiver), 0);
  receiver = nullptr;
}

TEST_F(Multicast, MisuseFailsCleanly) {
  receiver = make_member();
  sockaddr_in g = group("239.1.2.4");
  errno = 0;
  EXPECT_EQ(rdma_leave_multicast(receiver, sa(&g)), -1) << "never joined";
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  rdma_cm_join_mc_attr_ex mc{};
  mc.addr = sa(&g);
  mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1);
  EXPECT_EQ(errno, ENOTSUP);
  mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1) << "no address";
  EXPECT_EQ(errno, EINVAL);
  mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1) << "no flags";
  EXPECT_EQ(errno, EINVAL);
  mc.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  mc.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  mc.join_flags = RDMA_MC_JOIN_FLAG_RESERVED + 5;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1) << "unknown join flags";
  EXPECT_EQ(errno, EINVAL);
  mc.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
  mc.comp_mask |= 1u << 7;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1) << "an unknown bit among known";
  EXPECT_EQ(errno, ENOTSUP);
  mc.comp_mask = 0;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1) << "nothing valid";
  EXPECT_EQ(errno, EINVAL);
  sockaddr bad{};
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(receiver, &bad, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  mc.addr = &bad;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(receiver, &mc, nullptr), -1) << "no address family";
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_leave_multicast(receiver, sa(&g)), -1) << "no failed join left a group";
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  EXPECT_EQ(wait_event(ch, 200), nullptr) << "and none reports one";
}

}  // namespace
}  // namespace rdmacm::rxe
