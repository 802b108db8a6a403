// The libibverbs calls of the library, answered by one fake InfiniBand
// device (see fake_verbs.h). Definitions in the executable take precedence
// over libibverbs' for the library's objects linked into it. QPs, CQs,
// completion channels, MRs and address handles are heap objects, counted, so a leak shows
// twice: in fake_verbs_objects() and to LeakSanitizer. The data path (CQs,
// channels, MRs, posting) is fake_data_path.cpp's.
#include "fake_verbs.h"

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "fake_verbs_objects.h"

namespace rdmacm::testing {
namespace {

using fake::make;
using fake::release;

// No stream endpoint made ahead on the fake device (rsocket(7): on by
// default), before the first rsocket reads the configuration: a run of
// stream connects would leave a spare (a QP, CQ and channel) for up to a
// second after each test, whose TearDown counts the fake's objects, and the
// tests and the fuzzer that script or play against the last QP made would
// meet the spare instead. Spares are tested on the real device
// (tests/rxe/rsocket_spares_test.cpp).
[[maybe_unused]] const bool no_spares = [] { return setenv("RSOCKET_ENDPOINTS_AHEAD", "0", 1) == 0; }();

std::atomic<uint32_t> next_qp_num{1};
std::atomic<ibv_qp*> last_qp{nullptr};
// Every live QP's transitions (QPs are modified from many threads at once
// in the concurrency tests).
std::mutex history_mutex;
std::map<const ibv_qp*, std::vector<ibv_qp_state>> history;
std::atomic<ibv_mtu> active_mtu{IBV_MTU_4096};  // the port's (fake_set_active_mtu)

ibv_device device = [] {
  ibv_device d{};
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;
  std::strcpy(d.name, "fake0");
  return d;
}();
ibv_context context = [] {
  ibv_context c{};
  c.device = &device;
  fake::set_data_path_ops(&c.ops);
  return c;
}();
ibv_pd pd = [] {
  ibv_pd p{};
  p.context = &context;
  return p;
}();

}  // namespace

size_t fake_verbs_objects() { return fake::objects; }

void fake_set_active_mtu(ibv_mtu mtu) { active_mtu = mtu; }

void fake_set_iwarp(bool iwarp) {
  device.node_type = iwarp ? IBV_NODE_RNIC : IBV_NODE_CA;
  device.transport_type = iwarp ? IBV_TRANSPORT_IWARP : IBV_TRANSPORT_IB;
}

ibv_qp* fake_last_qp() { return last_qp; }

std::vector<ibv_qp_state> qp_states(const ibv_qp* qp) {
  std::lock_guard lock(history_mutex);
  auto it = history.find(qp);
  return it == history.end() ? std::vector<ibv_qp_state>{} : it->second;
}

int add_qp(rdma_cm_id* id, ibv_qp_type type) {
  ibv_qp_init_attr attr{};
  attr.qp_type = type;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  return rdma_create_qp(id, nullptr, &attr);
}

void answer_at_once(FakeTransport& fake) {
  fake.addr.node_guid = kFakeDeviceGuid;
  fake.resolve_reports = true;
  fake.migrate_moves_events = true;
  fake.reply(Cmd::resolve_route, RDMA_CM_EVENT_ROUTE_RESOLVED);
  fake.reply(Cmd::connect, RDMA_CM_EVENT_CONNECT_RESPONSE);
  fake.reply(Cmd::accept, RDMA_CM_EVENT_ESTABLISHED);
  fake.reply(Cmd::disconnect, RDMA_CM_EVENT_DISCONNECTED);
  fake.reply(Cmd::join_mcast, RDMA_CM_EVENT_MULTICAST_JOIN);
}

}  // namespace rdmacm::testing

using namespace rdmacm::testing;

namespace {
std::atomic<int> device_opens{0}, device_closes{0};
}  // namespace

int rdmacm::testing::fake_device_opens() { return device_opens; }
int rdmacm::testing::fake_device_closes() { return device_closes; }

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (!list) return nullptr;
  list[0] = &device;
  if (num_devices) *num_devices = 1;
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

__be64 ibv_get_device_guid(ibv_device*) { return kFakeDeviceGuid; }

ibv_context* ibv_open_device(ibv_device*) {
  ++device_opens;
  return &context;
}

int ibv_close_device(ibv_context*) {
  ++device_closes;
  return 0;
}

int ibv_query_device(ibv_context*, ibv_device_attr* attr) {
  *attr = {};
  attr->node_guid = kFakeDeviceGuid;
  attr->max_qp_init_rd_atom = 16;
  attr->max_qp_rd_atom = 16;
  attr->phys_port_cnt = 1;
  return 0;
}

// verbs.h makes ibv_query_port a macro; this is the function behind it.
int(ibv_query_port)(ibv_context*, uint8_t, _compat_ibv_port_attr* compat) {
  auto* attr = reinterpret_cast<ibv_port_attr*>(compat);
  attr->state = IBV_PORT_ACTIVE;
  attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = active_mtu;
  attr->lid = 1;
  return 0;
}

// Address handles: counted objects, nothing more (the fake data path
// records what a UD send carries, not where it goes).
ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr*) {
  auto* ah = make<ibv_ah>();
  ah->context = pd->context;
  ah->pd = pd;
  return ah;
}

int ibv_destroy_ah(ibv_ah* ah) { return release(ah); }

ibv_pd* ibv_alloc_pd(ibv_context*) { return &pd; }

int ibv_dealloc_pd(ibv_pd*) { return 0; }

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  auto* qp = make<fake::Qp>();
  qp->max_recv_wr = static_cast<int>(attr->cap.max_recv_wr);
  qp->context = pd->context;
  qp->pd = pd;
  qp->qp_context = attr->qp_context;
  qp->send_cq = attr->send_cq;
  qp->recv_cq = attr->recv_cq;
  qp->srq = attr->srq;
  qp->qp_type = attr->qp_type;
  qp->sig_all = attr->sq_sig_all;
  qp->qp_num = next_qp_num++;
  qp->state = IBV_QPS_RESET;
  last_qp = qp;
  return qp;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (mask & IBV_QP_STATE) {
    qp->state = attr->qp_state;
    {
      std::lock_guard lock(history_mutex);
      history[qp].push_back(attr->qp_state);
    }
    if (attr->qp_state == IBV_QPS_ERR) fake::flush(static_cast<fake::Qp*>(qp));
  }
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  {
    std::lock_guard lock(history_mutex);
    history.erase(qp);
  }
  ibv_qp* self = qp;
  last_qp.compare_exchange_strong(self, nullptr);
  return release(static_cast<fake::Qp*>(qp));
}

int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return 0; }

int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return 0; }

int ibv_destroy_srq(ibv_srq*) { return EINVAL; }  // none is ever made

}  // extern "C"
