// A connection request the library cannot give an owner (core/id_state.cpp
// adopt_id, core/events.cpp accept_request): the kernel made a new id for
// it, which nobody would ever accept or reject, so the library destroys that
// kernel id and drops the event, counting it against the listener. Checked
// with the fake kernel's ids, the library's own tables and the process's
// fds: the dropped request leaves nothing, the next request still arrives,
// and the listener's destroy does not wait for the dropped event.
#include <dirent.h>

#include <chrono>

#include "core/objects.h"
#include "device_fixture.h"

namespace rdmacm::testing {
namespace {

using namespace std::chrono_literals;

// Open file descriptors of the process (private channels are eventfds here).
size_t open_fds() {
  size_t n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir)) ++n;
    closedir(dir);
  }
  return n;
}

// Ids in the library's tables: visible to the application, or reachable by
// the kernel's events (by uid or by handle).
size_t library_ids() {
  auto& objs = core::Objects::get();
  return objs.ids().listed() + objs.handles.size();
}

class RequestFailures : public DeviceTest {
 protected:
  // A synchronous listener on 10.0.0.1:7471, its private channel
  // non-blocking: an endpoint (rdma_create_ep, RAI_PASSIVE) or an id made
  // with a NULL channel, bound and listening.
  void sync_listener(bool endpoint, rdma_cm_id** out) {
    sockaddr_in local = ipv4("10.0.0.1", 7471);
    rdma_cm_id* listener = nullptr;
    if (endpoint) {
      rdma_addrinfo res{};
      res.ai_flags = RAI_PASSIVE;
      res.ai_port_space = RDMA_PS_TCP;
      res.ai_qp_type = IBV_QPT_RC;
      res.ai_src_addr = reinterpret_cast<sockaddr*>(&local);
      res.ai_src_len = sizeof(local);
      ASSERT_EQ(rdma_create_ep(&listener, &res, nullptr, nullptr), 0);
    } else {
      ASSERT_EQ(rdma_create_id(nullptr, &listener, nullptr, RDMA_PS_TCP), 0);
      ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&local)), 0);
    }
    *out = listener;
    nonblocking(listener->channel->fd);
    ASSERT_EQ(rdma_listen(listener, 4), 0);
  }

  // Destroys the listener, expecting it not to wait: it waits until every
  // event the kernel reported for it is counted, a dropped request included
  // (if not, it hangs and the watchdog fails the test by name).
  void destroy_promptly(rdma_cm_id* listener) {
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(rdma_destroy_id(listener), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - start, test::scaled(1s));
  }

  // A request to a synchronous listener while `command` fails with err:
  // rdma_get_request finds nothing (EAGAIN: the request was dropped, and
  // nothing else is queued), the request's kernel id is gone, and neither
  // an id nor its private channel is left behind. The next request arrives.
  void sync_request_dropped_when(bool endpoint, Cmd command, int err) {
    rdma_cm_id* listener = nullptr;
    ASSERT_NO_FATAL_FAILURE(sync_listener(endpoint, &listener));
    size_t fds = open_fds();
    size_t ids = library_ids();
    size_t kernel_ids = fake.live_ids();

    uint32_t doomed = fake.queue_request(listener->channel->fd, uid(listener));
    fake.fail_next(command, err);
    rdma_cm_id* child = nullptr;
    EXPECT_FAILS_WITH(rdma_get_request(listener, &child), EAGAIN);
    EXPECT_EQ(child, nullptr);
    EXPECT_EQ(fake.kernel_ids().count(doomed), 0u) << "the request's kernel id lives on";
    EXPECT_EQ(fake.live_ids(), kernel_ids);
    EXPECT_EQ(library_ids(), ids) << "the library keeps an id for the dropped request";
    EXPECT_EQ(open_fds(), fds) << "the dropped request's private channel is still open";
    EXPECT_EQ(listener->event, nullptr);

    uint32_t good = fake.queue_request(listener->channel->fd, uid(listener));
    ASSERT_EQ(rdma_get_request(listener, &child), 0) << strerror(errno);
    ASSERT_NE(child, nullptr);
    EXPECT_NE(child->channel, listener->channel) << "a synchronous listener's request is private";
    EXPECT_EQ(fake.kernel_ids().count(good), 1u);
    EXPECT_EQ(rdma_destroy_id(child), 0);
    EXPECT_EQ(fake.kernel_ids().count(good), 0u);

    destroy_promptly(listener);
    EXPECT_EQ(open_fds(), fds - 1) << "the listener's channel";
  }
};

// No private channel can be opened for the request's id (EMFILE).
TEST_F(RequestFailures, EndpointListenerDropsARequestWhoseChannelCannotOpen) {
  sync_request_dropped_when(true, Cmd::open_channel, EMFILE);
}

// The kernel refuses to move the request's id to its private channel.
TEST_F(RequestFailures, SyncListenerDropsARequestWhoseMigrationFails) {
  sync_request_dropped_when(false, Cmd::migrate_id, ENOMEM);
}

// Adopted, but its address cannot be read: the new id is discarded.
TEST_F(RequestFailures, SyncListenerDiscardsARequestWhoseAddressQueryFails) {
  sync_request_dropped_when(true, Cmd::query_addr, EINVAL);
}

// The same on a listener with a channel: the application's rdma_get_cm_event
// never sees the request whose address (or path) query failed.
TEST_F(RequestFailures, ListenerOnAChannelDiscardsARequestWhoseQueriesFail) {
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &listener, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in local = ipv4("10.0.0.1", 7471);
  ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&local)), 0);
  ASSERT_EQ(rdma_listen(listener, 4), 0);
  size_t ids = library_ids();
  size_t kernel_ids = fake.live_ids();

  for (Cmd command : {Cmd::query_addr, Cmd::query_path}) {
    SCOPED_TRACE(command);
    uint32_t doomed = fake.queue_request(channel->fd, uid(listener));
    fake.fail_next(command, ENOMEM);
    expect_no_event(channel);
    EXPECT_EQ(fake.kernel_ids().count(doomed), 0u) << "the request's kernel id lives on";
    EXPECT_EQ(fake.live_ids(), kernel_ids);
    EXPECT_EQ(library_ids(), ids) << "the library keeps an id for the dropped request";
  }

  fake.queue_request(channel->fd, uid(listener));
  rdma_cm_event* ev = next(channel);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST) << rdma_event_str(ev->event);
  EXPECT_EQ(ev->listen_id, listener);
  rdma_cm_id* child = ev->id;
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(rdma_destroy_id(child), 0);
  destroy_promptly(listener);
}

}  // namespace
}  // namespace rdmacm::testing
