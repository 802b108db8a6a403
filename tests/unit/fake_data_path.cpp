// The fake device's data path (see fake_verbs.h): memory registration, the
// CQs' completions and events, and the QPs' posted work requests.
#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "fake_verbs_objects.h"

namespace rdmacm::testing {
namespace fake {

std::atomic<size_t> objects{0};
std::mutex data_mutex;

namespace {

std::atomic<uint32_t> next_key{0x100};
std::map<uint32_t, ibv_mr*> mrs;  // by key (lkey == rkey), under data_mutex
size_t event_faults = 0;          // under data_mutex

// The MR with this key that holds [addr, addr+len), if any (data_mutex held).
ibv_mr* covering(uint32_t key, uint64_t addr, size_t len) {
  auto it = mrs.find(key);
  if (it == mrs.end()) return nullptr;
  auto start = reinterpret_cast<uintptr_t>(it->second->addr);
  if (addr < start || len > it->second->length || addr - start > it->second->length - len)
    return nullptr;
  return it->second;
}

// Queues a completion and raises the CQ's event if it was armed (data_mutex held).
void complete(ibv_cq* cq, const ibv_wc& wc) {
  auto* c = static_cast<Cq*>(cq);
  c->completions.push_back(wc);
  if (!c->armed || !c->channel) return;
  c->armed = false;
  ++c->events;
  auto* ch = static_cast<Channel*>(c->channel);
  ch->events.push_back(cq);
  uint64_t one = 1;
  (void)!::write(ch->fd, &one, sizeof(one));
}

// As a device: a send that went fine completes only if signalled (or the QP
// signals all); one that failed or was flushed always does.
void complete_send(Qp* qp, const FakeSend& s, ibv_wc_status status) {
  if (status == IBV_WC_SUCCESS && !qp->sig_all && !(s.send_flags & IBV_SEND_SIGNALED)) return;
  ibv_wc wc{};
  wc.wr_id = s.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RDMA_WRITE;
  wc.qp_num = qp->qp_num;
  complete(qp->send_cq, wc);
}

void complete_recv(Qp* qp, uint64_t wr_id, ibv_wc wc) {
  wc.wr_id = wr_id;
  wc.qp_num = qp->qp_num;
  complete(qp->recv_cq, wc);
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard lock(data_mutex);
  auto* c = static_cast<Cq*>(cq);
  int i = 0;
  for (; i < n && !c->completions.empty(); ++i) {
    wc[i] = c->completions.front();
    c->completions.pop_front();
  }
  return i;
}

int req_notify_cq(ibv_cq* cq, int) {
  std::lock_guard lock(data_mutex);
  static_cast<Cq*>(cq)->armed = true;
  return 0;
}

int post_send(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard lock(data_mutex);
  auto* qp = static_cast<Qp*>(q);
  for (; wr; wr = wr->next) {
    FakeSend s{wr->wr_id, wr->opcode, wr->send_flags, be32toh(wr->imm_data),
               wr->wr.rdma.remote_addr, wr->wr.rdma.rkey, {}};
    ibv_wc_status status = IBV_WC_SUCCESS;
    for (int i = 0; i < wr->num_sge; ++i) {
      const ibv_sge& sge = wr->sg_list[i];
      if (!(wr->send_flags & IBV_SEND_INLINE) && !covering(sge.lkey, sge.addr, sge.length)) {
        status = IBV_WC_LOC_PROT_ERR;
        break;
      }
      auto* p = reinterpret_cast<const uint8_t*>(sge.addr);
      s.data.insert(s.data.end(), p, p + sge.length);
    }
    if (qp->state == IBV_QPS_ERR) status = IBV_WC_WR_FLUSH_ERR;
    if (status != IBV_WC_SUCCESS) {
      complete_send(qp, s, status);
      continue;
    }
    qp->unseen.push_back(s);
    if (qp->auto_complete)
      complete_send(qp, s, IBV_WC_SUCCESS);
    else
      qp->sends.push_back(std::move(s));
  }
  (void)bad;
  return 0;
}

int post_recv(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard lock(data_mutex);
  auto* qp = static_cast<Qp*>(q);
  for (; wr; wr = wr->next) {
    if (static_cast<int>(qp->recvs.size()) >= qp->max_recv_wr) {
      *bad = wr;
      return ENOMEM;
    }
    if (qp->state == IBV_QPS_ERR) {
      ibv_wc wc{};
      wc.status = IBV_WC_WR_FLUSH_ERR;
      complete_recv(qp, wr->wr_id, wc);
    } else {
      qp->recvs.push_back(wr->wr_id);
    }
  }
  return 0;
}

}  // namespace

void set_data_path_ops(ibv_context_ops* ops) {
  ops->poll_cq = poll_cq;
  ops->req_notify_cq = req_notify_cq;
  ops->post_send = post_send;
  ops->post_recv = post_recv;
}

void flush(Qp* qp) {
  std::lock_guard lock(data_mutex);
  ibv_wc wc{};
  wc.status = IBV_WC_WR_FLUSH_ERR;
  for (uint64_t id : qp->recvs) complete_recv(qp, id, wc);
  qp->recvs.clear();
  for (const FakeSend& s : qp->sends) complete_send(qp, s, IBV_WC_WR_FLUSH_ERR);
  qp->sends.clear();
}

}  // namespace fake

using namespace fake;

std::vector<FakeSend> fake_take_posted(ibv_qp* q) {
  std::lock_guard lock(data_mutex);
  auto* qp = static_cast<Qp*>(q);
  std::vector<FakeSend> out(qp->unseen.begin(), qp->unseen.end());
  qp->unseen.clear();
  return out;
}

size_t fake_outstanding_sends(const ibv_qp* qp) {
  std::lock_guard lock(data_mutex);
  return static_cast<const Qp*>(qp)->sends.size();
}

bool fake_complete_send(ibv_qp* q, ibv_wc_status status) {
  std::lock_guard lock(data_mutex);
  auto* qp = static_cast<Qp*>(q);
  if (qp->sends.empty()) return false;
  complete_send(qp, qp->sends.front(), status);
  qp->sends.pop_front();
  return true;
}

void fake_auto_complete(ibv_qp* q, bool on) {
  std::lock_guard lock(data_mutex);
  static_cast<Qp*>(q)->auto_complete = on;
}

size_t fake_posted_recvs(const ibv_qp* qp) {
  std::lock_guard lock(data_mutex);
  return static_cast<const Qp*>(qp)->recvs.size();
}

bool fake_receive(ibv_qp* q, const ibv_wc& wc) {
  std::lock_guard lock(data_mutex);
  auto* qp = static_cast<Qp*>(q);
  if (qp->recvs.empty()) return false;
  complete_recv(qp, qp->recvs.front(), wc);
  qp->recvs.pop_front();
  return true;
}

bool fake_remote_write(uint32_t rkey, uint64_t addr, const void* data, size_t len) {
  std::lock_guard lock(data_mutex);
  ibv_mr* mr = covering(rkey, addr, len);
  if (!mr || !(static_cast<unsigned>(mr->handle) & IBV_ACCESS_REMOTE_WRITE)) return false;
  if (len) std::memcpy(reinterpret_cast<void*>(addr), data, len);
  return true;
}

size_t fake_cq_event_faults() {
  std::lock_guard lock(data_mutex);
  return event_faults;
}

}  // namespace rdmacm::testing

using namespace rdmacm::testing::fake;

extern "C" {

// verbs.h makes ibv_reg_mr a macro; these are the functions behind it. The
// access flags are kept in the MR's handle (the fake has no kernel handle).
ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  if (!addr || !length) {
    errno = EINVAL;
    return nullptr;
  }
  auto* mr = make<ibv_mr>();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = mr->rkey = next_key++;
  mr->handle = static_cast<uint32_t>(access);
  std::lock_guard lock(data_mutex);
  mrs[mr->lkey] = mr;
  return mr;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t, unsigned access) {
  return (ibv_reg_mr)(pd, addr, length, static_cast<int>(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  {
    std::lock_guard lock(data_mutex);
    mrs.erase(mr->lkey);
  }
  return release(mr);
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* channel = make<Channel>();
  channel->context = ctx;
  channel->fd = fd;
  return channel;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  ::close(channel->fd);
  return release(static_cast<Channel*>(channel));
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  uint64_t one;
  if (::read(channel->fd, &one, sizeof(one)) != sizeof(one)) return -1;  // errno: read's
  std::lock_guard lock(data_mutex);
  auto* ch = static_cast<Channel*>(channel);
  if (ch->events.empty()) {  // the fd was written by something else
    errno = EIO;
    return -1;
  }
  auto* c = static_cast<Cq*>(ch->events.front());
  ch->events.pop_front();
  ++c->taken;
  *cq = c;
  *cq_context = c->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned n) {
  std::lock_guard lock(data_mutex);
  auto* c = static_cast<Cq*>(cq);
  c->acked += n;
  if (c->acked > c->taken) ++event_faults;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int) {
  auto* cq = make<Cq>();
  cq->context = ctx;
  cq->channel = channel;
  cq->cq_context = cq_context;
  cq->cqe = cqe;
  return cq;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  std::lock_guard lock(data_mutex);
  auto* c = static_cast<Cq*>(cq);
  if (cqe < static_cast<int>(c->completions.size())) return EINVAL;
  c->cqe = cqe;
  return 0;
}

int ibv_destroy_cq(ibv_cq* cq) {
  auto* c = static_cast<Cq*>(cq);
  {
    std::lock_guard lock(data_mutex);
    // A device's waits until every event taken is acknowledged.
    if (c->acked != c->taken) ++event_faults;
    // Events raised and not taken go with the CQ (a real channel drops them
    // too once the CQ is gone).
    if (auto* ch = static_cast<Channel*>(c->channel)) {
      for (auto it = ch->events.begin(); it != ch->events.end();) {
        if (*it != cq) {
          ++it;
          continue;
        }
        it = ch->events.erase(it);
        uint64_t one;
        (void)!::read(ch->fd, &one, sizeof(one));
      }
    }
  }
  return release(c);
}

}  // extern "C"
