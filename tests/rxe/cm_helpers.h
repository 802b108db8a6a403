// Building blocks for connection tests: waiting for events with a deadline,
// and a client/server pair on one device.
#pragma once

#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <string>

namespace rdmacm::rxe {

// Any sockaddr_* as the sockaddr the API takes.
inline sockaddr* sa(void* p) { return static_cast<sockaddr*>(p); }

// Polls the CQ until one completion arrives (true if it is one) or 5 s
// (scaled: tests/common/time_scale.h) pass.
bool poll_one(ibv_cq* cq, ibv_wc* wc);

// Waits up to timeout_ms for the channel's next event; nullptr on timeout.
// Not scaled: a test that expects no event gives the time it looks for one.
rdma_cm_event* wait_event(rdma_event_channel* ch, int timeout_ms = 5000);

// Waits for the next event (timeout_ms scaled) and checks its type (and
// status 0 unless the type is an error). The event is returned unacknowledged.
::testing::AssertionResult next_event_is(rdma_event_channel* ch, rdma_cm_event_type type,
                                         rdma_cm_event** out, int timeout_ms = 5000);

// Waits for an event of this type and acknowledges it.
::testing::AssertionResult expect_event(rdma_event_channel* ch, rdma_cm_event_type type,
                                        int timeout_ms = 5000);

// Small RC QP attributes with the library's default CQs.
ibv_qp_init_attr rc_qp_attr(uint32_t depth = 8);

// A listener on the device's address (kernel-chosen port) and a client id
// resolved to it, each on its own channel.
struct Pair {
  rdma_event_channel* server_ch = nullptr;
  rdma_event_channel* client_ch = nullptr;
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* client = nullptr;
  rdma_cm_id* server = nullptr;  // set by the test from CONNECT_REQUEST

  // Creates channels, listener and client; resolves the client's address and
  // route. Returns false (after a test failure) if any step fails.
  bool setup(rdma_port_space ps = RDMA_PS_TCP);
  // Destroys QPs and ids that exist, then the channels.
  void teardown();
};

// "EVENT_NAME (status N)", for failure messages.
std::string describe(const rdma_cm_event* ev);

}  // namespace rdmacm::rxe
