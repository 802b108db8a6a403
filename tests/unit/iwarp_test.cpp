// The CM on an iWARP device (the fake device made an RNIC): where rdma-core
// 44 does something else than on IB and RoCE, ours must too. Measured on
// Soft-iWARP against rdma-core's library by tests/rxe/iwarp (cm_table); here
// the library's side of it, command by command:
// - the GIDs (route.addr.addr.ibaddr): a bind and a connection request's id
//   read them from the kernel whatever the transport (iWARP's come from the
//   MAC address); a resolved address reads them on IB transports only; a
//   listen never;
// - the active side gets ESTABLISHED from the kernel (the iw_cm answers the
//   MPA reply itself): the library moves no QP and sends no RTU;
// - rdma_disconnect moves the QP to SQD (the iw_cm's graceful close), not ERR.
#include <vector>

#include "device_fixture.h"

namespace rdmacm::testing {
namespace {

using States = std::vector<ibv_qp_state>;
using Cmds = std::vector<Cmd>;

// The first bytes of siw0's GID in the VM: its MAC address, 52:54:00:4d:00:01.
constexpr uint8_t kMacGid[16] = {0x52, 0x54, 0x00, 0x4d, 0x00, 0x01};
constexpr uint8_t kPeerGid[16] = {0x52, 0x54, 0x00, 0x4d, 0x00, 0x02};

// Either device: what a disconnect does to a connected id's QP.
class Transports : public DeviceTest {
 protected:
  // An id with a QP, connected (the kernel answers ESTABLISHED), then
  // disconnected: the states its QP was moved to.
  States connect_and_disconnect() {
    rdma_cm_id* id = nullptr;
    routed(channel, true, &id);
    if (!id || !id->qp) return {};
    EXPECT_EQ(rdma_connect(id, nullptr), 0);
    queue_conn(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    expect_event(channel, id, RDMA_CM_EVENT_ESTABLISHED);
    EXPECT_EQ(rdma_disconnect(id), 0);
    States states = qp_states(id->qp);
    rdma_destroy_qp(id);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    return states;
  }
};

class Iwarp : public Transports {
 protected:
  void SetUp() override {
    fake_set_iwarp(true);
    std::memcpy(fake.sgid, kMacGid, 16);
    std::memcpy(fake.dgid, kPeerGid, 16);
    DeviceTest::SetUp();
  }
  void TearDown() override {
    DeviceTest::TearDown();
    fake_set_iwarp(false);
  }

  static bool gids_read(const rdma_cm_id* id) {
    const ibv_gid& s = id->route.addr.addr.ibaddr.sgid;
    const ibv_gid& d = id->route.addr.addr.ibaddr.dgid;
    return !std::memcmp(s.raw, kMacGid, 16) && !std::memcmp(d.raw, kPeerGid, 16);
  }
  static bool gids_zero(const rdma_cm_id* id) {
    static const uint8_t zero[16] = {};
    return !std::memcmp(id->route.addr.addr.ibaddr.sgid.raw, zero, 16) &&
           !std::memcmp(id->route.addr.addr.ibaddr.dgid.raw, zero, 16);
  }

  // A listener bound to 10.0.0.1:7471 (not yet listening).
  void bound(rdma_cm_id** out) {
    ASSERT_EQ(rdma_create_id(channel, out, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in local = ipv4("10.0.0.1", 7471);
    ASSERT_EQ(rdma_bind_addr(*out, reinterpret_cast<sockaddr*>(&local)), 0);
  }
};

TEST_F(Iwarp, BindReadsTheGids) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  size_t start = fake.commands().size();
  sockaddr_in local = ipv4("10.0.0.1", 7471);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&local)), 0);
  EXPECT_EQ(commands_since(start), (Cmds{Cmd::bind, Cmd::query_addr, Cmd::query_gid}));
  EXPECT_EQ(id->verbs->device->transport_type, IBV_TRANSPORT_IWARP);
  EXPECT_TRUE(gids_read(id));
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Iwarp, ListenReadsTheAddressOnly) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(bound(&id));
  size_t start = fake.commands().size();
  ASSERT_EQ(rdma_listen(id, 4), 0);
  EXPECT_EQ(commands_since(start), (Cmds{Cmd::listen, Cmd::query_addr}));
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Iwarp, ResolvedAddressAndRouteReadNoGids) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in peer = ipv4("10.0.0.2", 7471);
  size_t start = fake.commands().size();
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&peer), 100), 0);
  ASSERT_NO_FATAL_FAILURE(expect_event(channel, id, RDMA_CM_EVENT_ADDR_RESOLVED));
  ASSERT_EQ(rdma_resolve_route(id, 100), 0);
  ASSERT_NO_FATAL_FAILURE(expect_event(channel, id, RDMA_CM_EVENT_ROUTE_RESOLVED));
  EXPECT_EQ(commands_since(start), (Cmds{Cmd::resolve_addr, Cmd::get_event, Cmd::query_addr,
                                         Cmd::resolve_route, Cmd::get_event}));
  EXPECT_TRUE(gids_zero(id));
  EXPECT_EQ(id->route.num_paths, 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Iwarp, ConnectionRequestReadsTheGids) {
  rdma_cm_id* listener = nullptr;
  ASSERT_NO_FATAL_FAILURE(bound(&listener));
  ASSERT_EQ(rdma_listen(listener, 4), 0);
  std::memset(fake.sgid, 0x77, 16);  // the request's, not the listener's
  size_t start = fake.commands().size();
  fake.queue_request(channel->fd, uid(listener));
  rdma_cm_event* ev = next(channel);
  ASSERT_NE(ev, nullptr);
  ASSERT_EQ(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(commands_since(start),
            (Cmds{Cmd::get_event, Cmd::query_addr, Cmd::query_gid}));
  EXPECT_EQ(ev->id->route.addr.addr.ibaddr.sgid.raw[0], 0x77);
  EXPECT_EQ(ev->listen_id->route.addr.addr.ibaddr.sgid.raw[0], kMacGid[0]);
  rdma_cm_id* req = ev->id;
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(rdma_destroy_id(req), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
}

// The kernel's ESTABLISHED is the connection: nothing for the library to do.
TEST_F(Iwarp, ActiveSideEstablishesWithoutQpTransitionsOrRtu) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, true, &id));
  ASSERT_EQ(rdma_connect(id, nullptr), 0);
  queue_conn(id, RDMA_CM_EVENT_ESTABLISHED, 0, "mpa reply");
  size_t start = fake.commands().size();
  rdma_cm_event* ev = next(channel);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(private_data(ev), "mpa reply");
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(commands_since(start), Cmds{Cmd::get_event});
  EXPECT_EQ(qp_states(id->qp), States{IBV_QPS_INIT});
  rdma_destroy_qp(id);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Iwarp, DisconnectMovesTheQpToSqd) {
  EXPECT_EQ(connect_and_disconnect(), (States{IBV_QPS_INIT, IBV_QPS_SQD}));
}

// The same call on the IB device, for contrast: ERR.
TEST_F(Transports, DisconnectOnIbMovesTheQpToErr) {
  EXPECT_EQ(connect_and_disconnect(), (States{IBV_QPS_INIT, IBV_QPS_ERR}));
}

}  // namespace
}  // namespace rdmacm::testing
