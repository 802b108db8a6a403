// Connected mode through the kernel's rdma_cm: the whole RC life cycle, data
// over the library's QPs, rejection, synchronous ids, migration and misuse.
// Each test also runs against rdma-core's library (see CMakeLists.txt).
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "cm_helpers.h"
#include "rxe_env.h"

namespace rdmacm::rxe {
namespace {

using namespace std::chrono_literals;

class Connect : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(pair.setup()); }
  void TearDown() override { pair.teardown(); }

  // Server side: waits for the request and checks what rdma-core reports.
  rdma_cm_event* take_request() {
    rdma_cm_event* req = nullptr;
    EXPECT_TRUE(next_event_is(pair.server_ch, RDMA_CM_EVENT_CONNECT_REQUEST, &req));
    if (req && req->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      EXPECT_EQ(req->listen_id, pair.listener);
      EXPECT_NE(req->id, pair.listener);
      pair.server = req->id;
    }
    return req;
  }

  Pair pair;
};

TEST_F(Connect, FullLifeCycleWithPrivateDataAndTraffic) {
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0) << strerror(errno);
  EXPECT_NE(pair.client->send_cq, nullptr) << "library creates CQs when none given";
  EXPECT_NE(pair.client->recv_cq_channel, nullptr);
  EXPECT_EQ(pair.client->qp->pd, pair.client->pd);

  const char hello[] = "hello from the client";
  rdma_conn_param cp{};
  cp.private_data = hello;
  cp.private_data_len = sizeof(hello);
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  cp.retry_count = 5;
  cp.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(pair.client, &cp), 0) << strerror(errno);

  rdma_cm_event* req = take_request();
  ASSERT_NE(req, nullptr);
  ASSERT_NE(pair.server, nullptr);
  EXPECT_EQ(pair.server->context, &pair) << "new id inherits the listener's context";
  EXPECT_EQ(pair.server->channel, pair.server_ch);
  EXPECT_NE(pair.server->verbs, nullptr);
  EXPECT_EQ(pair.server->verbs, pair.client->verbs);
  // RoCE CM request private data: 92 bytes less rdma_cm's 36-byte header.
  EXPECT_EQ(req->param.conn.private_data_len, 56);
  ASSERT_NE(req->param.conn.private_data, nullptr);
  EXPECT_STREQ(static_cast<const char*>(req->param.conn.private_data), hello);
  const auto* pad = static_cast<const uint8_t*>(req->param.conn.private_data);
  for (size_t i = sizeof(hello); i < 56; ++i) ASSERT_EQ(pad[i], 0) << "byte " << i;
  EXPECT_EQ(req->param.conn.initiator_depth, 1);
  EXPECT_EQ(req->param.conn.responder_resources, 1);
  EXPECT_EQ(req->param.conn.rnr_retry_count, 7);
  EXPECT_EQ(req->param.conn.qp_num, pair.client->qp->qp_num);
  // The peer's address is the client's.
  auto* peer = reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(pair.server));
  auto* client_local = reinterpret_cast<sockaddr_in*>(rdma_get_local_addr(pair.client));
  EXPECT_EQ(peer->sin_port, client_local->sin_port);
  EXPECT_EQ(rdma_get_dst_port(pair.server), rdma_get_src_port(pair.client));

  attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.server, nullptr, &attr), 0) << strerror(errno);
  char buf[64] = {};
  ibv_mr* mr = rdma_reg_msgs(pair.server, buf, sizeof(buf));
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(rdma_post_recv(pair.server, nullptr, buf, sizeof(buf), mr), 0);

  const char world[] = "world";
  rdma_conn_param ap{};
  ap.private_data = world;
  ap.private_data_len = sizeof(world);
  ap.responder_resources = 1;
  ap.initiator_depth = 1;
  ASSERT_EQ(rdma_accept(pair.server, &ap), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(req), 0);

  rdma_cm_event* est = nullptr;
  ASSERT_TRUE(next_event_is(pair.client_ch, RDMA_CM_EVENT_ESTABLISHED, &est));
  EXPECT_EQ(est->id, pair.client);
  ASSERT_NE(est->param.conn.private_data, nullptr);
  EXPECT_STREQ(static_cast<const char*>(est->param.conn.private_data), world);
  EXPECT_EQ(est->param.conn.private_data_len, 196) << "whole CM REP private data";
  EXPECT_EQ(rdma_ack_cm_event(est), 0);
  ASSERT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_ESTABLISHED));

  // Both QPs are ready to send: the library moved them to RTS.
  ibv_qp_attr qa;
  ibv_qp_init_attr qia;
  ASSERT_EQ(ibv_query_qp(pair.client->qp, &qa, IBV_QP_STATE, &qia), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
  ASSERT_EQ(ibv_query_qp(pair.server->qp, &qa, IBV_QP_STATE, &qia), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);

  char msg[] = "payload over RC";
  ibv_mr* smr = rdma_reg_msgs(pair.client, msg, sizeof(msg));
  ASSERT_NE(smr, nullptr);
  ASSERT_EQ(rdma_post_send(pair.client, nullptr, msg, sizeof(msg), smr, 0), 0);
  ibv_wc wc;
  ASSERT_TRUE(poll_one(pair.client->send_cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  ASSERT_TRUE(poll_one(pair.server->recv_cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.byte_len, sizeof(msg));
  EXPECT_STREQ(buf, msg);

  // The passive side learns of the disconnect and answers it with its own,
  // which completes the active side's (the CM's DREQ/DREP exchange).
  ASSERT_EQ(rdma_disconnect(pair.client), 0) << strerror(errno);
  EXPECT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_DISCONNECTED));
  EXPECT_EQ(rdma_disconnect(pair.server), 0) << strerror(errno);
  EXPECT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_DISCONNECTED));
  ASSERT_EQ(ibv_query_qp(pair.client->qp, &qa, IBV_QP_STATE, &qia), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_ERR) << "disconnect flushes the QP";
  EXPECT_EQ(rdma_dereg_mr(smr), 0);
  EXPECT_EQ(rdma_dereg_mr(mr), 0);
}

TEST_F(Connect, TimewaitExitFollowsDisconnect) {
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0);
  rdma_conn_param cp{};
  ASSERT_EQ(rdma_connect(pair.client, &cp), 0);
  rdma_cm_event* req = take_request();
  ASSERT_NE(req, nullptr);
  attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.server, nullptr, &attr), 0);
  ASSERT_EQ(rdma_accept(pair.server, &cp), 0);
  rdma_ack_cm_event(req);
  ASSERT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_ESTABLISHED));
  ASSERT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_ESTABLISHED));
  ASSERT_EQ(rdma_disconnect(pair.server), 0);
  ASSERT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_DISCONNECTED));
  ASSERT_EQ(rdma_disconnect(pair.client), 0);
  ASSERT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_DISCONNECTED));
  // After the CM's time-wait, both ids with QPs hear that it is over.
  EXPECT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 20000));
  EXPECT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 20000));
}

TEST_F(Connect, RejectCarriesPrivateDataAndPutsQpInError) {
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0);
  rdma_conn_param cp{};
  cp.retry_count = 1;
  ASSERT_EQ(rdma_connect(pair.client, &cp), 0) << strerror(errno);
  rdma_cm_event* req = take_request();
  ASSERT_NE(req, nullptr);
  const char nope[] = "go away";
  ASSERT_EQ(rdma_reject(pair.server, nope, sizeof(nope)), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(req), 0);

  rdma_cm_event* rej = nullptr;
  ASSERT_TRUE(next_event_is(pair.client_ch, RDMA_CM_EVENT_REJECTED, &rej));
  EXPECT_EQ(rej->status, 28) << "IB_CM_REJ_CONSUMER_DEFINED";
  ASSERT_NE(rej->param.conn.private_data, nullptr);
  EXPECT_STREQ(static_cast<const char*>(rej->param.conn.private_data), nope);
  EXPECT_EQ(rej->param.conn.private_data_len, 148) << "whole CM REJ private data";
  EXPECT_EQ(rdma_ack_cm_event(rej), 0);
  ibv_qp_attr qa;
  ibv_qp_init_attr qia;
  ASSERT_EQ(ibv_query_qp(pair.client->qp, &qa, IBV_QP_STATE, &qia), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_ERR);
}

TEST_F(Connect, WithoutQpTheApplicationEstablishes) {
  // No QP on the client: it sees CONNECT_RESPONSE and calls rdma_establish.
  rdma_conn_param cp{};
  cp.qp_num = 0x1234;
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(pair.client, &cp), 0) << strerror(errno);
  rdma_cm_event* req = take_request();
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->param.conn.qp_num, 0x1234u);
  rdma_conn_param ap{};
  ap.qp_num = 0x4321;
  ASSERT_EQ(rdma_accept(pair.server, &ap), 0) << strerror(errno);
  rdma_ack_cm_event(req);

  rdma_cm_event* resp = nullptr;
  ASSERT_TRUE(next_event_is(pair.client_ch, RDMA_CM_EVENT_CONNECT_RESPONSE, &resp));
  EXPECT_EQ(resp->param.conn.qp_num, 0x4321u);
  rdma_ack_cm_event(resp);
  ASSERT_EQ(rdma_establish(pair.client), 0) << strerror(errno);
  EXPECT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_ESTABLISHED));
}

TEST_F(Connect, SynchronousClient) {
  // A client id without a channel: every call returns when its event has.
  rdma_cm_id* sync = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &sync, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = device_addr(ntohs(rdma_get_src_port(pair.listener)));
  ASSERT_EQ(rdma_resolve_addr(sync, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  ASSERT_EQ(rdma_resolve_route(sync, 2000), 0) << strerror(errno);
  EXPECT_EQ(sync->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(sync, nullptr, &attr), 0) << strerror(errno);

  std::thread server([&] {
    rdma_cm_event* req = take_request();
    if (!req) return;
    ibv_qp_init_attr sattr = rc_qp_attr();
    EXPECT_EQ(rdma_create_qp(pair.server, nullptr, &sattr), 0);
    rdma_conn_param ap{};
    EXPECT_EQ(rdma_accept(pair.server, &ap), 0) << strerror(errno);
    rdma_ack_cm_event(req);
    EXPECT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_ESTABLISHED));
    // Answer the client's disconnect, which it waits for synchronously.
    EXPECT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_DISCONNECTED));
    EXPECT_EQ(rdma_disconnect(pair.server), 0) << strerror(errno);
  });
  rdma_conn_param cp{};
  EXPECT_EQ(rdma_connect(sync, &cp), 0) << strerror(errno);
  ASSERT_NE(sync->event, nullptr);
  EXPECT_EQ(sync->event->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(rdma_disconnect(sync), 0) << strerror(errno);
  server.join();
  EXPECT_EQ(sync->event->event, RDMA_CM_EVENT_DISCONNECTED);
  rdma_destroy_qp(sync);
  EXPECT_EQ(rdma_destroy_id(sync), 0);
}

TEST_F(Connect, SynchronousConnectToNobodyFails) {
  rdma_cm_id* sync = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &sync, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = device_addr(1);  // no listener on port 1
  ASSERT_EQ(rdma_resolve_addr(sync, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ASSERT_EQ(rdma_resolve_route(sync, 2000), 0);
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(sync, nullptr, &attr), 0);
  rdma_conn_param cp{};
  errno = 0;
  EXPECT_EQ(rdma_connect(sync, &cp), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  EXPECT_EQ(sync->event->event, RDMA_CM_EVENT_REJECTED);
  rdma_destroy_qp(sync);
  EXPECT_EQ(rdma_destroy_id(sync), 0);
}

TEST_F(Connect, MigratedIdReportsOnItsNewChannel) {
  rdma_event_channel* other = rdma_create_event_channel();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(rdma_migrate_id(pair.client, other), 0) << strerror(errno);
  EXPECT_EQ(pair.client->channel, other);
  rdma_conn_param cp{};
  cp.qp_num = 1;
  ASSERT_EQ(rdma_connect(pair.client, &cp), 0);
  rdma_cm_event* req = take_request();
  ASSERT_NE(req, nullptr);
  ASSERT_EQ(rdma_reject(pair.server, nullptr, 0), 0);
  rdma_ack_cm_event(req);
  EXPECT_TRUE(expect_event(other, RDMA_CM_EVENT_REJECTED));
  ASSERT_EQ(rdma_migrate_id(pair.client, pair.client_ch), 0);
  EXPECT_EQ(rdma_destroy_id(pair.client), 0);
  pair.client = nullptr;
  rdma_destroy_event_channel(other);
}

TEST_F(Connect, SeveralClientsOnOneListener) {
  constexpr int kClients = 4;
  rdma_cm_id* clients[kClients] = {};
  sockaddr_in dst = device_addr(ntohs(rdma_get_src_port(pair.listener)));
  for (auto& c : clients) {
    ASSERT_EQ(rdma_create_id(pair.client_ch, &c, nullptr, RDMA_PS_TCP), 0);
    ASSERT_EQ(rdma_resolve_addr(c, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    ASSERT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    ASSERT_EQ(rdma_resolve_route(c, 2000), 0);
    ASSERT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    ibv_qp_init_attr attr = rc_qp_attr();
    ASSERT_EQ(rdma_create_qp(c, nullptr, &attr), 0);
    rdma_conn_param cp{};
    ASSERT_EQ(rdma_connect(c, &cp), 0);
  }
  rdma_cm_id* accepted[kClients] = {};
  for (auto& s : accepted) {
    rdma_cm_event* req = nullptr;
    ASSERT_TRUE(next_event_is(pair.server_ch, RDMA_CM_EVENT_CONNECT_REQUEST, &req));
    s = req->id;
    ibv_qp_init_attr attr = rc_qp_attr();
    ASSERT_EQ(rdma_create_qp(s, nullptr, &attr), 0);
    rdma_conn_param ap{};
    ASSERT_EQ(rdma_accept(s, &ap), 0);
    rdma_ack_cm_event(req);
  }
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_ESTABLISHED));
    EXPECT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_ESTABLISHED));
  }
  for (int i = 0; i < kClients; ++i) {
    rdma_destroy_qp(clients[i]);
    rdma_destroy_qp(accepted[i]);
    EXPECT_EQ(rdma_destroy_id(clients[i]), 0);
    EXPECT_EQ(rdma_destroy_id(accepted[i]), 0);
  }
}

TEST_F(Connect, RouteCarriesPathRecords) {
  ASSERT_GE(pair.client->route.num_paths, 1);
  ASSERT_NE(pair.client->route.path_rec, nullptr);
  const ibv_sa_path_rec& path = pair.client->route.path_rec[0];
  EXPECT_EQ(memcmp(path.sgid.raw, pair.client->route.addr.addr.ibaddr.sgid.raw, 16), 0);
  EXPECT_EQ(memcmp(path.dgid.raw, pair.client->route.addr.addr.ibaddr.dgid.raw, 16), 0);
  EXPECT_NE(path.mtu, 0);
}

TEST_F(Connect, SharedReceiveQueueNotifyAndQpAttributes) {
  // Client with a QP of its own CQs; server with an SRQ-backed QP.
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(pair.client, nullptr), 0) << strerror(errno);
  rdma_cm_event* req = take_request();
  ASSERT_NE(req, nullptr);

  ibv_srq_init_attr srq_attr{};
  srq_attr.attr.max_wr = 8;
  srq_attr.attr.max_sge = 1;
  ASSERT_EQ(rdma_create_srq(pair.server, nullptr, &srq_attr), 0) << strerror(errno);
  ASSERT_NE(pair.server->srq, nullptr);
  attr = rc_qp_attr();  // max_recv_wr sizes the receive CQ the SRQ feeds
  attr.srq = nullptr;   // the library uses the id's SRQ
  ASSERT_EQ(rdma_create_qp(pair.server, nullptr, &attr), 0) << strerror(errno);
  EXPECT_EQ(pair.server->qp->srq, pair.server->srq);

  char buf[32] = {};
  ibv_mr* mr = rdma_reg_msgs(pair.server, buf, sizeof(buf));
  ASSERT_NE(mr, nullptr);
  // With an SRQ on the id, rdma_post_recv posts to the SRQ.
  ASSERT_EQ(rdma_post_recv(pair.server, nullptr, buf, sizeof(buf), mr), 0);
  rdma_conn_param ap{};
  ASSERT_EQ(rdma_accept(pair.server, &ap), 0) << strerror(errno);
  EXPECT_EQ(req->param.conn.srq, 0);
  rdma_ack_cm_event(req);
  ASSERT_TRUE(expect_event(pair.client_ch, RDMA_CM_EVENT_ESTABLISHED));
  ASSERT_TRUE(expect_event(pair.server_ch, RDMA_CM_EVENT_ESTABLISHED));

  // COMM_EST matters only before the connection is established; after, the
  // CM says it is connected already.
  errno = 0;
  EXPECT_EQ(rdma_notify(pair.server, IBV_EVENT_COMM_EST), -1);
  EXPECT_EQ(errno, EISCONN);
  ibv_qp_attr qa{};
  int mask = 0;
  qa.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(rdma_init_qp_attr(pair.client, &qa, &mask), 0) << strerror(errno);
  EXPECT_TRUE(mask & IBV_QP_DEST_QPN);
  EXPECT_EQ(qa.dest_qp_num, pair.server->qp->qp_num);

  char msg[] = "via the SRQ";
  ibv_mr* smr = rdma_reg_msgs(pair.client, msg, sizeof(msg));
  ASSERT_EQ(rdma_post_send(pair.client, nullptr, msg, sizeof(msg), smr, 0), 0);
  ibv_wc wc;
  ASSERT_TRUE(poll_one(pair.server->recv_cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(buf, msg);
  rdma_dereg_mr(smr);
  rdma_dereg_mr(mr);
  rdma_destroy_qp(pair.server);
  rdma_destroy_srq(pair.server);
  EXPECT_EQ(pair.server->srq, nullptr);
}

TEST_F(Connect, EceTravelsWithRequestAndReject) {
  ibv_ece local{};
  local.vendor_id = 0x15b3;
  local.options = 0x5;
  ASSERT_EQ(rdma_set_local_ece(pair.client, &local), 0) << strerror(errno);
  ibv_ece bad = local;
  bad.comp_mask = 1;
  errno = 0;
  EXPECT_EQ(rdma_set_local_ece(pair.client, &bad), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_conn_param cp{};
  cp.qp_num = 5;
  ASSERT_EQ(rdma_connect(pair.client, &cp), 0);
  rdma_cm_event* req = take_request();
  ASSERT_NE(req, nullptr);
  ibv_ece remote{};
  ASSERT_EQ(rdma_get_remote_ece(pair.server, &remote), 0) << strerror(errno);
  EXPECT_EQ(remote.vendor_id, local.vendor_id);
  EXPECT_EQ(remote.options, local.options);
  ASSERT_EQ(rdma_reject_ece(pair.server, nullptr, 0), 0) << strerror(errno);
  rdma_ack_cm_event(req);
  rdma_cm_event* rej = nullptr;
  ASSERT_TRUE(next_event_is(pair.client_ch, RDMA_CM_EVENT_REJECTED, &rej));
  EXPECT_EQ(rej->status, 35) << "IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED";
  rdma_ack_cm_event(rej);
}

TEST_F(Connect, MisuseFailsCleanly) {
  // Connecting a TCP id with neither QP nor parameters.
  errno = 0;
  EXPECT_EQ(rdma_connect(pair.client, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  // Private data beyond what a CM request carries (56 bytes here).
  uint8_t big[200] = {};
  rdma_conn_param cp{};
  cp.private_data = big;
  cp.private_data_len = sizeof(big);
  errno = 0;
  EXPECT_EQ(rdma_connect(pair.client, &cp), -1);
  EXPECT_EQ(errno, EINVAL);
  // More responder resources than the device has.
  rdma_conn_param greedy{};
  greedy.responder_resources = 200;
  errno = 0;
  EXPECT_EQ(rdma_connect(pair.client, &greedy), -1);
  EXPECT_EQ(errno, EINVAL);
  // A second QP on the same id.
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0);
  attr = rc_qp_attr();
  errno = 0;
  EXPECT_EQ(rdma_create_qp(pair.client, nullptr, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(Connect, MisuseRdmaCoreCrashesOn) {
  if (reference()) GTEST_SKIP() << "rdma-core dereferences NULL or freed state here";
  // Connect before resolving: the id has no device yet.
  rdma_cm_id* fresh = nullptr;
  ASSERT_EQ(rdma_create_id(pair.client_ch, &fresh, nullptr, RDMA_PS_TCP), 0);
  rdma_conn_param cp{};
  errno = 0;
  EXPECT_EQ(rdma_connect(fresh, &cp), -1);
  EXPECT_EQ(errno, EINVAL);
  // Accept on an id that never received a request.
  errno = 0;
  EXPECT_EQ(rdma_accept(fresh, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  // Destroying a QP twice.
  ibv_qp_init_attr attr = rc_qp_attr();
  ASSERT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0);
  rdma_destroy_qp(pair.client);
  errno = 0;
  rdma_destroy_qp(pair.client);
  EXPECT_EQ(errno, EINVAL);
  // A QP on an id with no device.
  attr = rc_qp_attr();
  errno = 0;
  EXPECT_EQ(rdma_create_qp(fresh, nullptr, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  // Private data length without data.
  errno = 0;
  EXPECT_EQ(rdma_reject(pair.listener, nullptr, 10), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(fresh), 0);
}

// A QP asked for with every capability zero and no CQs: rdma-core creates
// no CQ for a zero depth and hands verbs a NULL one (a crash). Ours refuses
// it, and still creates the QP once CQs exist.
TEST_F(Connect, QpWithoutCapabilitiesOrCqsIsRefused) {
  if (reference()) GTEST_SKIP() << "rdma-core crashes in ibv_create_qp here";
  ibv_qp_init_attr attr{};
  attr.qp_type = IBV_QPT_RC;
  errno = 0;
  EXPECT_EQ(rdma_create_qp(pair.client, nullptr, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  attr.cap.max_send_wr = 4;  // a send CQ, but still none to receive on
  errno = 0;
  EXPECT_EQ(rdma_create_qp(pair.client, nullptr, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(pair.client->qp, nullptr);
  EXPECT_EQ(pair.client->send_cq, nullptr) << "a refused QP leaves no CQ behind";
  ibv_cq* cq = ibv_create_cq(pair.client->verbs, 8, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  attr = ibv_qp_init_attr{};
  attr.qp_type = IBV_QPT_RC;
  attr.send_cq = attr.recv_cq = cq;
  EXPECT_EQ(rdma_create_qp(pair.client, nullptr, &attr), 0) << strerror(errno);
  rdma_destroy_qp(pair.client);
  ibv_destroy_cq(cq);
}

TEST_F(Connect, AcceptOnListenerIsRefusedByTheKernel) {
  rdma_conn_param ap{};
  ap.qp_num = 1;
  errno = 0;
  EXPECT_EQ(rdma_accept(pair.listener, &ap), -1);
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace rdmacm::rxe
