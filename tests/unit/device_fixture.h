// Set-up for tests that need ids on the fake device but script the kernel's
// connection events themselves: the fake kernel resolves addresses and
// routes at once, but nothing answers connect or accept (the test queues
// the response, with the private data and status it wants). The test's
// channel is non-blocking, so an event that was dropped shows as EAGAIN.
#pragma once

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "fake_verbs.h"
#include "fixture.h"

namespace rdmacm::testing {

class DeviceTest : public CmTest {
 protected:
  void SetUp() override {
    fake.addr.node_guid = kFakeDeviceGuid;
    fake.resolve_reports = true;
    fake.migrate_moves_events = true;
    fake.reply(Cmd::resolve_route, RDMA_CM_EVENT_ROUTE_RESOLVED);
    CmTest::SetUp();
    nonblocking(channel->fd);
  }
  void TearDown() override {
    CmTest::TearDown();
    EXPECT_EQ(fake.live_ids(), 0u) << "kernel ids left behind";
    EXPECT_EQ(fake_verbs_objects(), 0u) << "QPs, CQs or completion channels left behind";
  }

  // The next event of a channel; nullptr (and a failure) if there is none.
  rdma_cm_event* next(rdma_event_channel* ch) {
    rdma_cm_event* ev = nullptr;
    int ret = rdma_get_cm_event(ch, &ev);
    EXPECT_EQ(ret, 0) << "no event: " << strerror(errno);
    return ret ? nullptr : ev;
  }

  // Expects the channel to be empty (EAGAIN); an event found is a failure,
  // acknowledged so that its id can still be destroyed.
  void expect_no_event(rdma_event_channel* ch) {
    rdma_cm_event* ev = nullptr;
    errno = 0;
    if (rdma_get_cm_event(ch, &ev) == 0) {
      ADD_FAILURE() << "unexpected " << rdma_event_str(ev->event);
      rdma_ack_cm_event(ev);
      return;
    }
    EXPECT_EQ(errno, EAGAIN) << strerror(errno);
  }

  // A TCP id with its route resolved, on `ch` or (nullptr) synchronous with
  // its private channel non-blocking; with a QP (in INIT) if asked.
  void routed(rdma_event_channel* ch, bool qp, rdma_cm_id** out) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    *out = id;
    if (!ch) nonblocking(id->channel->fd);
    sockaddr_in peer = ipv4("10.0.0.2", 7471);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&peer), 100), 0);
    if (ch) {
      ASSERT_NO_FATAL_FAILURE(expect_event(ch, id, RDMA_CM_EVENT_ADDR_RESOLVED));
    }
    ASSERT_EQ(rdma_resolve_route(id, 100), 0);
    if (ch) {
      ASSERT_NO_FATAL_FAILURE(expect_event(ch, id, RDMA_CM_EVENT_ROUTE_RESOLVED));
    }
    if (qp) {
      ASSERT_EQ(add_qp(id), 0);
    }
  }

  // Takes the next event of ch, expecting it to be this one, and acks it.
  void expect_event(rdma_event_channel* ch, rdma_cm_id* id, rdma_cm_event_type type) {
    rdma_cm_event* ev = next(ch);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->id, id);
    EXPECT_EQ(ev->event, type) << rdma_event_str(ev->event);
    EXPECT_EQ(ev->status, 0);
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  }

  // The kernel's handle for an id the library created (0 if none).
  uint32_t handle_of(rdma_cm_id* id) const {
    for (const auto& [handle, u] : fake.kernel_ids())
      if (u == uid(id)) return handle;
    return 0;
  }

  // Queues a connection event for id on its channel as the kernel reports
  // it: by uid and handle, with a status and the peer's private data.
  void queue_conn(rdma_cm_id* id, rdma_cm_event_type type, int32_t status,
                  const std::string& data = "") {
    ucma_abi_event_resp w{};
    w.uid = uid(id);
    w.id = handle_of(id);
    w.event = type;
    w.status = static_cast<uint32_t>(status);
    w.param.conn.private_data_len = static_cast<uint8_t>(data.size());
    std::memcpy(w.param.conn.private_data, data.data(),
                std::min(data.size(), sizeof(w.param.conn.private_data)));
    fake.queue_raw(id->channel->fd, w);
  }

  // The private data an event carries, as a string.
  static std::string private_data(const rdma_cm_event* ev) {
    const rdma_conn_param& c = ev->param.conn;
    if (!c.private_data) return {};
    return std::string(static_cast<const char*>(c.private_data), c.private_data_len);
  }

  // The commands the fake kernel has seen since `start` (a commands() size).
  std::vector<Cmd> commands_since(size_t start) const {
    auto all = fake.commands();
    return {all.begin() + static_cast<ptrdiff_t>(std::min(start, all.size())), all.end()};
  }
};

}  // namespace rdmacm::testing
