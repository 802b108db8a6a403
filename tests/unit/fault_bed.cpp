#include "fault_bed.h"

#include <poll.h>

#include <chrono>
#include <thread>

namespace rdmacm::testing {

sockaddr* addr(const char* ip, uint16_t port) {
  static sockaddr_in sin;
  sin = ipv4(ip, port);
  return reinterpret_cast<sockaddr*>(&sin);
}

rdma_cm_id* make(Bed& b, bool sync, rdma_port_space ps) {
  rdma_cm_id* id = nullptr;
  EXPECT_EQ(rdma_create_id(sync ? nullptr : b.channel, &id, nullptr, ps), 0);
  if (!id) return nullptr;
  if (sync) nonblocking(id->channel->fd);
  return b.id = b.keep(id);
}

int outcome(Bed& b, rdma_cm_event_type want) {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(b.channel, &ev)) return -1;
  int status = ev->status;
  rdma_cm_event_type type = ev->event;
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) b.keep(ev->id);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  if (status) {
    errno = status < 0 ? -status : status;
    return -1;
  }
  if (type != want) {
    errno = ENOMSG;
    return -1;
  }
  return 0;
}

void resolved(Bed& b, bool sync) {
  make(b, sync);
  ASSERT_EQ(rdma_resolve_addr(b.id, nullptr, addr("10.0.0.2", 7471), 100), 0);
  if (!sync) {
    ASSERT_EQ(outcome(b, RDMA_CM_EVENT_ADDR_RESOLVED), 0);
  }
}

void routed(Bed& b, bool sync) {
  resolved(b, sync);
  ASSERT_EQ(rdma_resolve_route(b.id, 100), 0);
  if (!sync) {
    ASSERT_EQ(outcome(b, RDMA_CM_EVENT_ROUTE_RESOLVED), 0);
  }
}

void routed_with_qp(Bed& b, bool sync) {
  routed(b, sync);
  ASSERT_EQ(add_qp(b.id), 0);
}

void requested(Bed& b) {
  rdma_cm_id* listener = make(b);
  ASSERT_EQ(rdma_bind_addr(listener, addr("10.0.0.1", 7471)), 0);
  ASSERT_EQ(rdma_listen(listener, 1), 0);
  b.fake.queue_request(b.channel->fd, uid(listener));
  ASSERT_EQ(outcome(b, RDMA_CM_EVENT_CONNECT_REQUEST), 0);
  b.id = b.ids.back();
}

void sync_listener(Bed& b, bool qp) {
  rdma_addrinfo res{};
  res.ai_flags = RAI_PASSIVE;
  res.ai_port_space = RDMA_PS_TCP;
  res.ai_qp_type = IBV_QPT_RC;
  res.ai_src_addr = addr("10.0.0.1", 7471);
  res.ai_src_len = sizeof(sockaddr_in);
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_ep(&listener, &res, nullptr, qp ? &attr : nullptr), 0);
  b.id = b.keep(listener);
  nonblocking(listener->channel->fd);
  ASSERT_EQ(rdma_listen(listener, 1), 0);
  b.fake.queue_request(listener->channel->fd, uid(listener));
}

int get_request(Bed& b) {
  rdma_cm_id* listener = b.id;
  rdma_cm_id* child = nullptr;
  int ret = rdma_get_request(listener, &child);
  int err = errno;
  if (!ret) b.id = b.keep(child);
  if (ret && listener->event && listener->event->id != listener) b.keep(listener->event->id);
  errno = err;
  return ret;
}

void connected(Bed& b, bool sync) {
  routed(b, sync);
  rdma_conn_param param{};
  ASSERT_EQ(rdma_connect(b.id, &param), 0);
  if (!sync) {
    ASSERT_EQ(outcome(b, RDMA_CM_EVENT_CONNECT_RESPONSE), 0);
  }
}

void queued_user_event(Bed& b) {
  make(b);
  ASSERT_EQ(rdma_write_cm_event(b.id, RDMA_CM_EVENT_USER, 0, 7), 0);
}

void joined(Bed& b, bool sync) {
  make(b, sync, RDMA_PS_UDP);
  ASSERT_EQ(rdma_join_multicast(b.id, addr("239.1.1.1"), nullptr), 0);
}

int user_events(Bed& b) {
  int n = 0;
  for (rdma_event_channel* ch : {b.channel, b.other}) {
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(ch, &ev) == 0) {
      n += ev->event == RDMA_CM_EVENT_USER;
      rdma_ack_cm_event(ev);
    }
  }
  return n;
}

void second_channel(Bed& b) {
  b.other = rdma_create_event_channel();
  ASSERT_NE(b.other, nullptr);
  nonblocking(b.other->fd);
}

void readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, test::scaled_ms(2000)), 1);
}

void wait_for_commands(Bed& b, size_t n) {
  auto deadline = std::chrono::steady_clock::now() + test::scaled(std::chrono::seconds(2));
  while (b.fake.commands().size() < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace rdmacm::testing
