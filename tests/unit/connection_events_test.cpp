// The event pump's connection branches (core/events.cpp translate) on the
// fake device, with the kernel's events scripted by the test: what the
// library does with CONNECT_RESPONSE (with a QP it completes the handshake
// itself: QP to RTR and RTS, then the RTU through the transport), with a
// failure to complete it (CONNECT_ERROR, the attempt's trailing events
// dropped but counted), and with REJECTED; asynchronously and through the
// synchronous calls.
#include <chrono>
#include <vector>

#include "device_fixture.h"

namespace rdmacm::testing {
namespace {

using namespace std::chrono_literals;
using States = std::vector<ibv_qp_state>;

// IB_CM_REJ_CONSUMER_DEFINED: what the kernel reports for the peer's
// rdma_reject.
constexpr int32_t kConsumerReject = 28;

class ConnectionEvents : public DeviceTest {
 protected:
  // Destroys the id (and its QP) and expects that not to wait: a destroy
  // waits for every event the kernel reported for the id to be counted, so
  // a dropped event the library forgot to count hangs here (the watchdog
  // then fails the test by name).
  void destroy_promptly(rdma_cm_id* id) {
    if (id->qp) rdma_destroy_qp(id);
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(rdma_destroy_id(id), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - start, test::scaled(1s));
  }

  // A connect whose response cannot be completed because `command` fails
  // with err: the application gets CONNECT_ERROR with -err, the QP goes to
  // ERR, and the REJECTED and DISCONNECTED the kernel sends for that
  // attempt are dropped, yet counted for the id's destroy.
  void connect_error_when(Cmd command, int err, const States& qp_history) {
    rdma_cm_id* id = nullptr;
    ASSERT_NO_FATAL_FAILURE(routed(channel, true, &id));
    ASSERT_EQ(rdma_connect(id, nullptr), 0);
    queue_conn(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, "welcome");
    fake.fail_next(command, err);

    rdma_cm_event* ev = next(channel);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->id, id);
    EXPECT_EQ(ev->event, RDMA_CM_EVENT_CONNECT_ERROR) << rdma_event_str(ev->event);
    EXPECT_EQ(ev->status, -err);
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
    EXPECT_EQ(id->qp->state, IBV_QPS_ERR);
    EXPECT_EQ(qp_states(id->qp), qp_history);

    // The kernel ends the failed attempt; then an unrelated event follows,
    // which must be the next one the application sees.
    queue_conn(id, RDMA_CM_EVENT_REJECTED, kConsumerReject, "late");
    queue_conn(id, RDMA_CM_EVENT_DISCONNECTED, 0);
    fake.queue_event(channel->fd, uid(id), RDMA_CM_EVENT_ADDR_CHANGE, 0);
    ev = next(channel);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_CHANGE)
        << "the failed attempt's trailing event was delivered: " << rdma_event_str(ev->event);
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
    expect_no_event(channel);

    destroy_promptly(id);
  }
};

// With a QP the library answers the peer's response itself: the QP is
// refreshed in INIT and moved to RTR and RTS, the RTU goes out as the
// transport's accept, and the application gets ESTABLISHED carrying the
// response's private data.
TEST_F(ConnectionEvents, ConnectResponseWithQpEstablishesAndSendsTheRtu) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, true, &id));
  EXPECT_EQ(qp_states(id->qp), (States{IBV_QPS_INIT}));
  ASSERT_EQ(rdma_connect(id, nullptr), 0);
  queue_conn(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, "welcome");
  size_t start = fake.commands().size();

  rdma_cm_event* ev = next(channel);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ESTABLISHED) << rdma_event_str(ev->event);
  EXPECT_EQ(ev->status, 0);
  EXPECT_EQ(private_data(ev), "welcome");
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);

  EXPECT_EQ(commands_since(start), (std::vector<Cmd>{Cmd::get_event, Cmd::init_qp_attr,
                                                     Cmd::init_qp_attr, Cmd::init_qp_attr,
                                                     Cmd::accept}));
  EXPECT_EQ(id->qp->state, IBV_QPS_RTS);
  EXPECT_EQ(qp_states(id->qp),
            (States{IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}));
  destroy_promptly(id);
}

// Moving the QP fails (the kernel refuses the attributes for INIT): no RTU.
TEST_F(ConnectionEvents, ConnectResponseWhoseQpCannotMoveIsAConnectError) {
  size_t start = fake.commands().size();
  connect_error_when(Cmd::init_qp_attr, ENODEV, States{IBV_QPS_INIT, IBV_QPS_ERR});
  for (Cmd c : commands_since(start)) EXPECT_NE(c, Cmd::accept) << "an RTU was sent";
}

// The RTU itself fails, with the QP already in RTS.
TEST_F(ConnectionEvents, ConnectResponseWhoseRtuFailsIsAConnectError) {
  connect_error_when(Cmd::accept, ECONNRESET,
                     States{IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR});
}

// Without a QP the application completes the connection itself: it gets
// CONNECT_RESPONSE with the private data, and nothing reaches the kernel.
// Not a failed attempt either: the DISCONNECTED that may follow is its.
TEST_F(ConnectionEvents, ConnectResponseWithoutQpIsDeliveredAsIs) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, false, &id));
  rdma_conn_param param{};
  ASSERT_EQ(rdma_connect(id, &param), 0);
  queue_conn(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, "hello");
  size_t start = fake.commands().size();

  rdma_cm_event* ev = next(channel);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_CONNECT_RESPONSE) << rdma_event_str(ev->event);
  EXPECT_EQ(ev->status, 0);
  EXPECT_EQ(private_data(ev), "hello");
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(commands_since(start), std::vector<Cmd>{Cmd::get_event}) << "nothing issued";

  queue_conn(id, RDMA_CM_EVENT_DISCONNECTED, 0);
  ASSERT_NO_FATAL_FAILURE(expect_event(channel, id, RDMA_CM_EVENT_DISCONNECTED));
  destroy_promptly(id);
}

// The peer refused: REJECTED reaches the application with the kernel's
// status (the reject reason) and the peer's private data, and the library
// moves the id's QP to ERR.
TEST_F(ConnectionEvents, RejectedIsDeliveredAndPutsTheQpInError) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, true, &id));
  ASSERT_EQ(rdma_connect(id, nullptr), 0);
  queue_conn(id, RDMA_CM_EVENT_REJECTED, kConsumerReject, "go away");
  size_t start = fake.commands().size();

  rdma_cm_event* ev = next(channel);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_REJECTED) << rdma_event_str(ev->event);
  EXPECT_EQ(ev->status, kConsumerReject);
  EXPECT_EQ(private_data(ev), "go away");
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(commands_since(start), std::vector<Cmd>{Cmd::get_event});
  EXPECT_EQ(id->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(qp_states(id->qp), (States{IBV_QPS_INIT, IBV_QPS_ERR}));
  destroy_promptly(id);
}

// --- the same through a synchronous id's rdma_connect ------------------------
// The kernel's answer is queued on the id's private channel before the call,
// which then reads it as its outcome (id->event).

TEST_F(ConnectionEvents, SyncConnectWithQpEstablishes) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(nullptr, true, &id));
  queue_conn(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, "welcome");
  size_t start = fake.commands().size();
  ASSERT_EQ(rdma_connect(id, nullptr), 0) << strerror(errno);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ESTABLISHED) << rdma_event_str(id->event->event);
  EXPECT_EQ(private_data(id->event), "welcome");
  EXPECT_EQ(commands_since(start),
            (std::vector<Cmd>{Cmd::connect, Cmd::get_event, Cmd::init_qp_attr, Cmd::init_qp_attr,
                              Cmd::init_qp_attr, Cmd::accept}));
  EXPECT_EQ(id->qp->state, IBV_QPS_RTS);
  destroy_promptly(id);
}

TEST_F(ConnectionEvents, SyncConnectIsRefusedOnRejected) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(nullptr, true, &id));
  queue_conn(id, RDMA_CM_EVENT_REJECTED, kConsumerReject, "go away");
  EXPECT_FAILS_WITH(rdma_connect(id, nullptr), ECONNREFUSED);
  ASSERT_NE(id->event, nullptr) << "the rejection is kept for the application";
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_REJECTED) << rdma_event_str(id->event->event);
  EXPECT_EQ(id->event->status, kConsumerReject);
  EXPECT_EQ(private_data(id->event), "go away");
  EXPECT_EQ(id->qp->state, IBV_QPS_ERR);
  destroy_promptly(id);
}

// Without a QP the rejection is the outcome all the same.
TEST_F(ConnectionEvents, SyncConnectWithoutQpIsRefusedOnRejected) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(nullptr, false, &id));
  queue_conn(id, RDMA_CM_EVENT_REJECTED, kConsumerReject);
  rdma_conn_param param{};
  EXPECT_FAILS_WITH(rdma_connect(id, &param), ECONNREFUSED);
  destroy_promptly(id);
}

TEST_F(ConnectionEvents, SyncConnectWhoseRtuFailsGivesTheErrno) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(nullptr, true, &id));
  queue_conn(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
  fake.fail_next(Cmd::accept, ECONNRESET);
  EXPECT_FAILS_WITH(rdma_connect(id, nullptr), ECONNRESET);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_CONNECT_ERROR) << rdma_event_str(id->event->event);
  EXPECT_EQ(id->event->status, -ECONNRESET);
  EXPECT_EQ(id->qp->state, IBV_QPS_ERR);
  destroy_promptly(id);
}

}  // namespace
}  // namespace rdmacm::testing
