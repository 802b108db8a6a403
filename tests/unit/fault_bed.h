// The world of one fault-injection point (fault_injection_test.cpp): a
// fresh fake kernel on the fake device, an event channel and the ids a row
// made; and the set-ups that bring an id into the state an operation needs.
// Set-ups report failures through GoogleTest; the rest return 0 or -1 with
// errno, like the C API.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstddef>
#include <vector>

#include "fake_verbs.h"
#include "fixture.h"

namespace rdmacm::testing {

// One injection point's world: a fresh fake kernel with a device that
// answers resolve, route, connect, accept, disconnect and join at once, an
// event channel (non-blocking: a dropped event shows as EAGAIN, not a wait)
// and the ids a row made, destroyed at the end.
struct Bed {
  Bed() {
    answer_at_once(fake);
    channel = rdma_create_event_channel();
    nonblocking(channel->fd);
  }

  ~Bed() {
    if (channel) clear();
  }

  // Destroys what is left; false if something would not go.
  bool clear() {
    bool ok = true;
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
      if ((*it)->qp) rdma_destroy_qp(*it);
      ok &= rdma_destroy_id(*it) == 0;
    }
    ids.clear();
    if (other) rdma_destroy_event_channel(other);
    rdma_destroy_event_channel(channel);
    other = channel = nullptr;
    return ok;
  }

  rdma_cm_id* keep(rdma_cm_id* id) {
    ids.push_back(id);
    return id;
  }
  void forget(rdma_cm_id* id) { std::erase(ids, id); }

  FakeTransport fake;
  rdma_event_channel* channel = nullptr;
  rdma_event_channel* other = nullptr;  // a second channel, for migrations
  std::vector<rdma_cm_id*> ids;         // live, in order of creation
  rdma_cm_id* id = nullptr;             // what the operation acts on
  size_t fault_step = 0;                // the step that fails (0: none)
};

// An address, valid until the next call.
sockaddr* addr(const char* ip, uint16_t port = 0);

// --- set-ups: b.id is the id they leave in that state ----------------------

// A new id on b's channel, or a synchronous one (its private channel made
// non-blocking too).
rdma_cm_id* make(Bed& b, bool sync = false, rdma_port_space ps = RDMA_PS_TCP);
// With its address resolved, then its route (ADDR/ROUTE_RESOLVED taken).
void resolved(Bed& b, bool sync = false);
void routed(Bed& b, bool sync = false);
void routed_with_qp(Bed& b, bool sync);
// Connected without a QP (CONNECT_RESPONSE taken).
void connected(Bed& b, bool sync);
// The new id of a connection request to a listener on b's channel.
void requested(Bed& b);
// A synchronous endpoint listener (rdma_create_ep, RAI_PASSIVE) with a
// request waiting; qp: it gives its requests a QP.
void sync_listener(Bed& b, bool qp = false);
// An id with an event written by the application, not read yet.
void queued_user_event(Bed& b);
// A UDP id that joined 239.1.1.1 (its MULTICAST_JOIN not read yet).
void joined(Bed& b, bool sync = false);
// b.other, a second non-blocking channel.
void second_channel(Bed& b);

// --- operations and checks ---------------------------------------------------

// Takes the next event of b's channel: 0 if it is `want` with status 0,
// else -1 with errno from a failure status (an error event), ENOMSG for
// another event, or the call's errno. A request's new id is kept.
int outcome(Bed& b, rdma_cm_event_type want);
// rdma_get_request on the listener b.id; the new id becomes b.id. A request
// whose QP could not be made stays on the listener's stored event (kept).
int get_request(Bed& b);
// Reads both channels dry; the number of USER events among them.
int user_events(Bed& b);
// Waits (up to 2 s) for an fd to become readable.
void readable(int fd);
// Waits (up to 2 s) until the fake kernel has seen n commands in all.
void wait_for_commands(Bed& b, size_t n);

}  // namespace rdmacm::testing
