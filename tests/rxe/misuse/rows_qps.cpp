// QPs and SRQs: rdma_create_qp(_ex), rdma_destroy_qp, rdma_create_srq(_ex),
// rdma_destroy_srq.
#include <rdma/rdma_verbs.h>

#include "handles.h"

namespace rdmacm::misuse {
namespace {

ibv_qp_init_attr rc(uint32_t depth) {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = depth;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  return a;
}

}  // namespace

void add_qp_rows(std::vector<Row>& rows) {
  add_bad_id_rows(rows, "create_qp", [](State&, rdma_cm_id* id) { auto a = rc(4); return ret(rdma_create_qp(id, nullptr, &a)); });
  rows.push_back({"create_qp(NULL attr)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_create_qp(s.resolved(), nullptr, nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"create_qp(unbound id: no device)", "-1 EINVAL",
                  [](State& s) { auto a = rc(4); return ret(rdma_create_qp(s.fresh(), nullptr, &a)); },
                  "rdma-core dereferences the id's missing device"});
  rows.push_back({"create_qp(twice)", "-1 EINVAL",
                  [](State& s) { auto a = rc(4); return ret(rdma_create_qp(s.with_qp(), nullptr, &a)); }});
  rows.push_back({"create_qp(all capabilities zero)", "-1 EINVAL",
                  [](State& s) { auto a = rc(0); return ret(rdma_create_qp(s.resolved(), nullptr, &a)); },
                  "rdma-core hands verbs a NULL CQ"});
  rows.push_back({"create_qp(no receive depth, no CQ)", "-1 EINVAL",
                  [](State& s) { auto a = rc(4); a.cap.max_recv_wr = 0; return ret(rdma_create_qp(s.resolved(), nullptr, &a)); },
                  "rdma-core hands verbs a NULL CQ"});
  rows.push_back({"create_qp(depth past the device's)", "-1 EINVAL",
                  [](State& s) { auto a = rc(1u << 30); return ret(rdma_create_qp(s.resolved(), nullptr, &a)); }});
  rows.push_back({"create_qp(1000 SGEs)", "-1 EINVAL",
                  [](State& s) { auto a = rc(4); a.cap.max_send_sge = 1000; return ret(rdma_create_qp(s.resolved(), nullptr, &a)); }});
  rows.push_back({"create_qp(QP type 99)", "-1 EINVAL",
                  [](State& s) { auto a = rc(4); a.qp_type = static_cast<ibv_qp_type>(99); return ret(rdma_create_qp(s.resolved(), nullptr, &a)); }});
  rows.push_back({"create_qp(UD QP on a TCP id)", "-1 EINVAL",
                  [](State& s) { auto a = rc(4); a.qp_type = IBV_QPT_UD; return ret(rdma_create_qp(s.resolved(), nullptr, &a)); }});
  rows.push_back({"create_qp(foreign PD)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* id = s.resolved(); auto a = rc(4);
                                 ibv_context* ctx = ibv_open_device(id->verbs->device);
                                 ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr; reset_errno();
                                 return ret(rdma_create_qp(id, pd, &a)); }});
  rows.push_back({"create_qp_ex(NULL attr)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_create_qp_ex(s.resolved(), nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"create_qp_ex(no PD in comp_mask)", "0",
                  [](State& s) { ibv_qp_init_attr_ex a{}; a.qp_type = IBV_QPT_RC;
                                 a.cap.max_send_wr = a.cap.max_recv_wr = 4; a.cap.max_send_sge = a.cap.max_recv_sge = 1;
                                 return ret(rdma_create_qp_ex(s.resolved(), &a)); }});
  add_bad_id_rows(rows, "create_qp_ex", [](State&, rdma_cm_id* id) { ibv_qp_init_attr_ex a{}; return ret(rdma_create_qp_ex(id, &a)); });

  add_bad_id_rows(rows, "destroy_qp", [](State&, rdma_cm_id* id) { rdma_destroy_qp(id); return none(); },
                  "void EINVAL");
  rows.push_back({"destroy_qp(id without QP)", "void EINVAL",
                  [](State& s) { rdma_destroy_qp(s.resolved()); return none(); },
                  "ours says there was no QP"});
  rows.push_back({"destroy_qp(twice)", "void EINVAL",
                  [](State& s) { rdma_cm_id* id = s.with_qp(); rdma_destroy_qp(id); reset_errno();
                                 rdma_destroy_qp(id); return none(); }, "ours says there was no QP"});

  add_bad_id_rows(rows, "create_srq", [](State&, rdma_cm_id* id) {
    ibv_srq_init_attr a{}; a.attr.max_wr = 4; a.attr.max_sge = 1; return ret(rdma_create_srq(id, nullptr, &a)); });
  rows.push_back({"create_srq(NULL attr)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_create_srq(s.resolved(), nullptr, nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"create_srq(unbound id)", "-1 EINVAL",
                  [](State& s) { ibv_srq_init_attr a{}; a.attr.max_wr = 4; a.attr.max_sge = 1;
                                 return ret(rdma_create_srq(s.fresh(), nullptr, &a)); },
                  "rdma-core dereferences the id's missing device"});
  rows.push_back({"create_srq(twice)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* id = s.resolved(); ibv_srq_init_attr a{}; a.attr.max_wr = 4; a.attr.max_sge = 1;
                                 rdma_create_srq(id, nullptr, &a); reset_errno();
                                 return ret(rdma_create_srq(id, nullptr, &a)); }, "rdma-core makes a second SRQ and loses the first"});
  rows.push_back({"create_srq(max_wr past the device's)", "-1 EINVAL",
                  [](State& s) { ibv_srq_init_attr a{}; a.attr.max_wr = 1u << 30; a.attr.max_sge = 1;
                                 return ret(rdma_create_srq(s.resolved(), nullptr, &a)); }});
  rows.push_back({"create_srq_ex(NULL attr)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_create_srq_ex(s.resolved(), nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"create_srq_ex(no type in comp_mask)", "-1 EINVAL",
                  [](State& s) { ibv_srq_init_attr_ex a{}; a.attr.max_wr = 4; a.attr.max_sge = 1;
                                 return ret(rdma_create_srq_ex(s.resolved(), &a)); }});
  add_bad_id_rows(rows, "destroy_srq", [](State&, rdma_cm_id* id) { rdma_destroy_srq(id); return none(); },
                  "void EINVAL");
  rows.push_back({"destroy_srq(id without SRQ)", "void EINVAL",
                  [](State& s) { rdma_destroy_srq(s.resolved()); return none(); }, "ours says there was no SRQ"});
}

}  // namespace rdmacm::misuse
