// Objects for the misuse rows, made on demand. Every failure to build one is
// fatal for the row (exit 99: the row cannot run), never a wrong verdict.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../../common/time_scale.h"
#include "../rxe_env.h"
#include "table.h"

namespace rdmacm::misuse {

int setup_report_fd = -1;

namespace {

[[noreturn]] void cannot(const std::string& what) {
  std::string why = "SETUP " + what + ": " + std::strerror(errno);
  std::fprintf(stderr, "%s\n", why.c_str());
  if (setup_report_fd >= 0) (void)!write(setup_report_fd, why.data(), why.size());
  _exit(99);
}

template <typename T>
T* need(T* p, const char* what) {
  if (!p) cannot(what);
  return p;
}

void need0(int r, const char* what) {
  if (r) cannot(what);
}

}  // namespace

rdma_cm_event* State::wait(rdma_event_channel* ch, rdma_cm_event_type type) {
  pollfd p{ch->fd, POLLIN, 0};
  int n = poll(&p, 1, test::scaled_ms(5000));
  if (n != 1) {
    if (n == 0) errno = ETIMEDOUT;
    cannot("waiting for an event");
  }
  rdma_cm_event* ev = nullptr;
  need0(rdma_get_cm_event(ch, &ev), "rdma_get_cm_event");
  if (ev->event != type) {
    errno = 0;
    cannot(std::string("got ") + rdma_event_str(ev->event) + " (status " +
           std::to_string(ev->status) + "), wanted " + rdma_event_str(type));
  }
  return ev;
}

rdma_event_channel* State::channel() {
  if (!channel_) channel_ = need(rdma_create_event_channel(), "rdma_create_event_channel");
  return channel_;
}

sockaddr* State::device_addr(uint16_t port) {
  sockaddr_in a = rxe::device_addr(port);
  std::memcpy(&addr_, &a, sizeof(a));
  return reinterpret_cast<sockaddr*>(&addr_);
}

rdma_cm_id* State::fresh(rdma_port_space ps) {
  rdma_cm_id* id = nullptr;
  need0(rdma_create_id(channel(), &id, nullptr, ps), "rdma_create_id");
  return id;
}

rdma_cm_id* State::bound(rdma_port_space ps) {
  rdma_cm_id* id = fresh(ps);
  need0(rdma_bind_addr(id, device_addr()), "rdma_bind_addr");
  return id;
}

rdma_cm_id* State::listener() {
  if (listener_) return listener_;
  server_ch_ = need(rdma_create_event_channel(), "rdma_create_event_channel");
  need0(rdma_create_id(server_ch_, &listener_, nullptr, RDMA_PS_TCP), "rdma_create_id");
  need0(rdma_bind_addr(listener_, device_addr()), "rdma_bind_addr");
  need0(rdma_listen(listener_, 4), "rdma_listen");
  return listener_;
}

uint16_t State::listen_port() { return rdma_get_src_port(listener()); }

rdma_cm_id* State::resolved(rdma_port_space ps) {
  uint16_t port = ps == RDMA_PS_TCP ? ntohs(listen_port()) : 7174;
  rdma_cm_id* id = fresh(ps);
  need0(rdma_resolve_addr(id, nullptr, device_addr(port), 2000), "rdma_resolve_addr");
  rdma_ack_cm_event(wait(channel(), RDMA_CM_EVENT_ADDR_RESOLVED));
  need0(rdma_resolve_route(id, 2000), "rdma_resolve_route");
  rdma_ack_cm_event(wait(channel(), RDMA_CM_EVENT_ROUTE_RESOLVED));
  return id;
}

rdma_cm_id* State::with_qp() {
  rdma_cm_id* id = resolved();
  ibv_qp_init_attr attr{};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  need0(rdma_create_qp(id, nullptr, &attr), "rdma_create_qp");
  return id;
}

rdma_cm_id* State::request() {
  rdma_cm_id* client = resolved();
  rdma_conn_param cp{};
  cp.responder_resources = cp.initiator_depth = 1;
  cp.qp_num = 0x123;  // no QP: the client never completes; the request is all we need
  need0(rdma_connect(client, &cp), "rdma_connect");
  rdma_cm_event* ev = wait(server_ch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  rdma_cm_id* id = ev->id;
  rdma_ack_cm_event(ev);  // the id stays, unanswered
  return id;
}

rdma_cm_id* State::sync_id() {
  rdma_cm_id* id = nullptr;
  need0(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), "rdma_create_id");
  return id;
}

rdma_cm_id* State::dead_id() {
  rdma_cm_id* id = fresh();
  need0(rdma_destroy_id(id), "rdma_destroy_id");
  return id;
}

rdma_cm_id* State::forged_id() {
  static rdma_cm_id forged;
  std::memset(&forged, 0, sizeof(forged));
  forged.channel = channel();
  return &forged;
}

rdma_event_channel* State::dead_channel() {
  rdma_event_channel* ch = need(rdma_create_event_channel(), "rdma_create_event_channel");
  rdma_destroy_event_channel(ch);
  return ch;
}

rdma_event_channel* State::forged_channel() {
  static rdma_event_channel forged;
  forged.fd = -1;
  return &forged;
}

rdma_cm_event* State::acked_event() {
  rdma_cm_id* id = fresh();
  need0(rdma_resolve_addr(id, nullptr, device_addr(7471), 2000), "rdma_resolve_addr");
  rdma_cm_event* ev = wait(channel(), RDMA_CM_EVENT_ADDR_RESOLVED);
  need0(rdma_ack_cm_event(ev), "rdma_ack_cm_event");
  return ev;
}

rdma_cm_event* State::forged_event() {
  static rdma_cm_event forged;
  std::memset(&forged, 0, sizeof(forged));
  forged.id = fresh();
  return &forged;
}

void reset_errno() { errno = 0; }

std::string ret(int r) {
  if (r == 0) return "0";
  if (r == -1) return std::string("-1 ") + (errno ? strerrorname_np(errno) : "errno=0");
  return "ret " + std::to_string(r);
}

std::string ptr(const void* p) {
  if (p) return "ptr";
  return std::string("NULL ") + (errno ? strerrorname_np(errno) : "errno=0");
}

std::string none() { return errno ? std::string("void ") + strerrorname_np(errno) : "void"; }

std::string value(long v) { return std::to_string(v); }

}  // namespace rdmacm::misuse
