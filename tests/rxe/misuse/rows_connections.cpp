// Connections: rdma_connect, rdma_listen, rdma_accept, rdma_reject(_ece),
// rdma_disconnect, rdma_establish, rdma_notify, rdma_init_qp_attr,
// rdma_set_local_ece, rdma_get_remote_ece, rdma_get_request; private data at
// and past each CM message's limit on RoCE (REQ 56, REP 196, REJ 148 bytes
// once the rdma_cm header is counted).
#include "handles.h"

namespace rdmacm::misuse {
namespace {

rdma_conn_param with_data(uint8_t len) {
  static uint8_t data[256] = {};
  rdma_conn_param p{};
  p.private_data = data;
  p.private_data_len = len;
  p.responder_resources = p.initiator_depth = 1;
  p.qp_num = 0x77;
  return p;
}

}  // namespace

void add_connection_rows(std::vector<Row>& rows) {
  add_bad_id_rows(rows, "connect", [](State&, rdma_cm_id* id) {
    rdma_conn_param p = with_data(0); return ret(rdma_connect(id, &p)); });
  rows.push_back({"connect(no QP, NULL param)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_connect(s.resolved(), nullptr)); }});
  rows.push_back({"connect(unresolved id)", "-1 EINVAL",
                  [](State& s) { rdma_conn_param p = with_data(0); return ret(rdma_connect(s.fresh(), &p)); },
                  "rdma-core dereferences the id's missing device"});
  rows.push_back({"connect(listener)", "-1 EINVAL",
                  [](State& s) { rdma_conn_param p = with_data(0); return ret(rdma_connect(s.listener(), &p)); }});
  rows.push_back({"connect(twice)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* id = s.resolved(); rdma_conn_param p = with_data(0);
                                 rdma_connect(id, &p); reset_errno(); return ret(rdma_connect(id, &p)); }});
  for (int len : {56, 57, 200, 255}) {
    std::string want = len <= 56 ? "0" : "-1 EINVAL";
    rows.push_back({"connect(private data " + std::to_string(len) + ")", want,
                    [len](State& s) { rdma_conn_param p = with_data(static_cast<uint8_t>(len));
                                      return ret(rdma_connect(s.resolved(), &p)); }});
  }
  rows.push_back({"connect(private_data_len without data)", "0",
                  [](State& s) { rdma_conn_param p = with_data(10); p.private_data = nullptr;
                                 return ret(rdma_connect(s.resolved(), &p)); }});
  // 255 (RDMA_MAX_RESP_RES) means "the device's maximum"; 200 is past rxe's.
  for (int rr : {255, 200}) {
    std::string want = rr == 255 ? "0" : "-1 EINVAL";
    rows.push_back({"connect(responder_resources " + std::to_string(rr) + ")", want,
                    [rr](State& s) { rdma_conn_param p = with_data(0); p.responder_resources = static_cast<uint8_t>(rr);
                                     return ret(rdma_connect(s.resolved(), &p)); }});
    rows.push_back({"connect(initiator_depth " + std::to_string(rr) + ")", want,
                    [rr](State& s) { rdma_conn_param p = with_data(0); p.initiator_depth = static_cast<uint8_t>(rr);
                                     return ret(rdma_connect(s.resolved(), &p)); }});
  }

  add_bad_id_rows(rows, "listen", [](State&, rdma_cm_id* id) { return ret(rdma_listen(id, 1)); });
  for (int backlog : {-1, 0, 1 << 30}) {
    rows.push_back({"listen(backlog " + std::to_string(backlog) + ")", "0",
                    [backlog](State& s) { return ret(rdma_listen(s.bound(), backlog)); }});
  }
  rows.push_back({"listen(unbound id)", "0",
                  [](State& s) { return ret(rdma_listen(s.fresh(), 1)); }});
  rows.push_back({"listen(twice)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_listen(s.listener(), 1)); }});
  rows.push_back({"listen(resolved id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_listen(s.resolved(), 1)); }});

  add_bad_id_rows(rows, "accept", [](State&, rdma_cm_id* id) { return ret(rdma_accept(id, nullptr)); });
  rows.push_back({"accept(fresh id)", "-1 EINVAL",
                  [](State& s) { rdma_conn_param p = with_data(0); return ret(rdma_accept(s.fresh(), &p)); },
                  "rdma-core dereferences the id's missing device"});
  rows.push_back({"accept(listener)", "-1 EINVAL",
                  [](State& s) { rdma_conn_param p = with_data(0); return ret(rdma_accept(s.listener(), &p)); }});
  rows.push_back({"accept(request, no QP, NULL param)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_accept(s.request(), nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  for (int len : {196, 197, 255}) {
    std::string want = len <= 196 ? "0" : "-1 EINVAL";
    rows.push_back({"accept(private data " + std::to_string(len) + ")", want,
                    [len](State& s) { rdma_cm_id* req = s.request(); rdma_conn_param p = with_data(static_cast<uint8_t>(len));
                                      return ret(rdma_accept(req, &p)); }});
  }
  rows.push_back({"accept(twice)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* req = s.request(); rdma_conn_param p = with_data(0);
                                 rdma_accept(req, &p); reset_errno(); return ret(rdma_accept(req, &p)); }});

  add_bad_id_rows(rows, "reject", [](State&, rdma_cm_id* id) { return ret(rdma_reject(id, nullptr, 0)); });
  rows.push_back({"reject(fresh id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_reject(s.fresh(), nullptr, 0)); }});
  rows.push_back({"reject(length without data)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_reject(s.request(), nullptr, 10)); },
                  "rdma-core sends the length with zeros for data"});
  for (int len : {148, 149, 255}) {
    std::string want = len <= 148 ? "0" : "-1 EINVAL";
    rows.push_back({"reject(private data " + std::to_string(len) + ")", want,
                    [len](State& s) { static uint8_t d[256]; rdma_cm_id* req = s.request();
                                      return ret(rdma_reject(req, d, static_cast<uint8_t>(len))); }});
  }
  rows.push_back({"reject(twice)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* req = s.request(); rdma_reject(req, nullptr, 0); reset_errno();
                                 return ret(rdma_reject(req, nullptr, 0)); }});
  add_bad_id_rows(rows, "reject_ece", [](State&, rdma_cm_id* id) { return ret(rdma_reject_ece(id, nullptr, 0)); });

  add_bad_id_rows(rows, "disconnect", [](State&, rdma_cm_id* id) { return ret(rdma_disconnect(id)); });
  rows.push_back({"disconnect(fresh id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_disconnect(s.fresh())); }});
  rows.push_back({"disconnect(listener)", "0",
                  [](State& s) { return ret(rdma_disconnect(s.listener())); }});
  rows.push_back({"disconnect(resolved, unconnected, with QP)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_disconnect(s.with_qp())); }});

  add_bad_id_rows(rows, "establish", [](State&, rdma_cm_id* id) { return ret(rdma_establish(id)); });
  rows.push_back({"establish(fresh id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_establish(s.fresh())); }});
  rows.push_back({"establish(resolved, never connected)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_establish(s.resolved())); }});

  add_bad_id_rows(rows, "notify", [](State&, rdma_cm_id* id) { return ret(rdma_notify(id, IBV_EVENT_COMM_EST)); });
  rows.push_back({"notify(fresh id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_notify(s.fresh(), IBV_EVENT_COMM_EST)); }});
  rows.push_back({"notify(unknown event 999)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_notify(s.request(), static_cast<ibv_event_type>(999))); }});

  add_bad_id_rows(rows, "init_qp_attr", [](State&, rdma_cm_id* id) {
    ibv_qp_attr a{}; int m = 0; a.qp_state = IBV_QPS_INIT; return ret(rdma_init_qp_attr(id, &a, &m)); });
  rows.push_back({"init_qp_attr(NULL attr)", "-1 EINVAL",
                  [](State& s) { int m = 0; return ret(rdma_init_qp_attr(s.resolved(), nullptr, &m)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"init_qp_attr(NULL mask)", "-1 EINVAL",
                  [](State& s) { ibv_qp_attr a{}; a.qp_state = IBV_QPS_INIT; return ret(rdma_init_qp_attr(s.resolved(), &a, nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"init_qp_attr(fresh id, INIT)", "-1 EINVAL",
                  [](State& s) { ibv_qp_attr a{}; int m; a.qp_state = IBV_QPS_INIT; return ret(rdma_init_qp_attr(s.fresh(), &a, &m)); }});
  rows.push_back({"init_qp_attr(state 99)", "-1 EINVAL",
                  [](State& s) { ibv_qp_attr a{}; int m; a.qp_state = static_cast<ibv_qp_state>(99); return ret(rdma_init_qp_attr(s.resolved(), &a, &m)); }});
  rows.push_back({"init_qp_attr(RTR before connecting)", "0",
                  [](State& s) { ibv_qp_attr a{}; int m; a.qp_state = IBV_QPS_RTR; return ret(rdma_init_qp_attr(s.resolved(), &a, &m)); }});

  add_bad_id_rows(rows, "set_local_ece", [](State&, rdma_cm_id* id) { ibv_ece e{}; return ret(rdma_set_local_ece(id, &e)); });
  rows.push_back({"set_local_ece(NULL ece)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_set_local_ece(s.fresh(), nullptr)); }});
  add_bad_id_rows(rows, "get_remote_ece", [](State&, rdma_cm_id* id) { ibv_ece e{}; return ret(rdma_get_remote_ece(id, &e)); });
  rows.push_back({"get_remote_ece(NULL ece)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_get_remote_ece(s.fresh(), nullptr)); }});

  add_bad_id_rows(rows, "get_request", [](State&, rdma_cm_id* id) { rdma_cm_id* out; return ret(rdma_get_request(id, &out)); });
  rows.push_back({"get_request(async listener)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* out; return ret(rdma_get_request(s.listener(), &out)); }});
  rows.push_back({"get_request(fresh sync id, not listening)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* out; return ret(rdma_get_request(s.sync_id(), &out)); },
                  "rdma-core waits for ever for a request that cannot come"});
  rows.push_back({"get_request(NULL out)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_get_request(s.listener(), nullptr)); }});
}

}  // namespace rdmacm::misuse
