// Runs every static inline function of the public headers, as compiled from
// rdma-core 44's headers and from ours, against the same scripted fake verbs
// provider, and requires identical observable behaviour: return value, errno,
// and every call made into libibverbs with its arguments.
//
// libibverbs is not linked: the few non-inline verbs the helpers call are
// defined here, the inline ones dispatch through ibv_context::ops, which the
// fixture fills in.

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <sstream>
#include <string>
#include <vector>

#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "inline_wrappers.h"

namespace {

// What a fake post_send may read of the work request (the rest of the
// union is uninitialised by design).
enum class WrView { kPlain, kRdma, kUd };

struct Fake {
  ibv_context ctx{};
  ibv_pd pd{};
  ibv_qp qp{};
  ibv_srq srq{};
  ibv_cq send_cq{};
  ibv_cq recv_cq{};
  ibv_comp_channel send_ch{};
  ibv_comp_channel recv_ch{};
  ibv_mr mr{};
  ibv_ah ah{};
  rdma_cm_id id{};
  unsigned char buf[256]{};

  std::vector<std::string> log;
  WrView view = WrView::kPlain;
  int post_result = 0;
  int dereg_result = 0;
  bool reg_fails = false;
  std::deque<int> poll_results;    // per ibv_poll_cq call
  std::deque<int> notify_results;  // per ibv_req_notify_cq call
  std::deque<int> event_results;   // per ibv_get_cq_event call
};

Fake* g_fake = nullptr;

std::string Name(const void* p) {
  Fake& f = *g_fake;
  if (p == nullptr) return "null";
  if (p == &f.pd) return "pd";
  if (p == &f.qp) return "qp";
  if (p == &f.srq) return "srq";
  if (p == &f.send_cq) return "send_cq";
  if (p == &f.recv_cq) return "recv_cq";
  if (p == &f.send_ch) return "send_ch";
  if (p == &f.recv_ch) return "recv_ch";
  if (p == &f.mr) return "mr";
  if (p == &f.ah) return "ah";
  if (p == &f.id) return "id";
  const auto* c = static_cast<const unsigned char*>(p);
  if (c >= f.buf && c <= f.buf + sizeof f.buf)
    return "buf+" + std::to_string(c - f.buf);
  return "?";
}

std::string Addr(uint64_t a) {
  return Name(reinterpret_cast<const void*>(static_cast<uintptr_t>(a)));
}

std::string Sges(const ibv_sge* sg, int n) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < n; ++i)
    os << (i ? " " : "") << "{" << Addr(sg[i].addr) << "," << sg[i].length
       << "," << sg[i].lkey << "}";
  os << "]";
  return os.str();
}

int Next(std::deque<int>& q, const char* what) {
  if (q.empty()) {
    ADD_FAILURE() << "unscripted call to " << what;
    return -99;
  }
  int v = q.front();
  q.pop_front();
  return v;
}

int FakePostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::ostringstream os;
  os << "post_send " << Name(qp) << " wr_id=" << Addr(wr->wr_id)
     << " next=" << Name(wr->next) << " sge=" << Sges(wr->sg_list, wr->num_sge)
     << " opcode=" << wr->opcode << " flags=" << wr->send_flags;
  if (g_fake->view == WrView::kRdma)
    os << " rdma={" << wr->wr.rdma.remote_addr << "," << wr->wr.rdma.rkey << "}";
  if (g_fake->view == WrView::kUd)
    os << " ud={" << Name(wr->wr.ud.ah) << "," << wr->wr.ud.remote_qpn << ","
       << wr->wr.ud.remote_qkey << "}";
  g_fake->log.push_back(os.str());
  if (g_fake->post_result) *bad = wr;
  return g_fake->post_result;
}

std::string RecvWr(const ibv_recv_wr* wr) {
  std::ostringstream os;
  os << "wr_id=" << Addr(wr->wr_id) << " next=" << Name(wr->next)
     << " sge=" << Sges(wr->sg_list, wr->num_sge);
  return os.str();
}

int FakePostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  g_fake->log.push_back("post_recv " + Name(qp) + " " + RecvWr(wr));
  if (g_fake->post_result) *bad = wr;
  return g_fake->post_result;
}

int FakePostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  g_fake->log.push_back("post_srq_recv " + Name(srq) + " " + RecvWr(wr));
  if (g_fake->post_result) *bad = wr;
  return g_fake->post_result;
}

int FakePollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  int r = Next(g_fake->poll_results, "poll_cq");
  g_fake->log.push_back("poll_cq " + Name(cq) + " n=" + std::to_string(n) +
                        " -> " + std::to_string(r));
  if (r > 0) {
    std::memset(wc, 0, sizeof *wc);
    wc->wr_id = 77;
    wc->status = IBV_WC_SUCCESS;
    wc->byte_len = 12;
  }
  return r;
}

int FakeReqNotifyCq(ibv_cq* cq, int solicited_only) {
  int r = Next(g_fake->notify_results, "req_notify_cq");
  g_fake->log.push_back("req_notify_cq " + Name(cq) + " solicited=" +
                        std::to_string(solicited_only) + " -> " +
                        std::to_string(r));
  return r;
}

// A fresh fake rdma_cm_id wired to the fake provider.
class InlineBehaviour : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = new Fake;
    g_fake = f_;
    Fake& f = *f_;
    f.ctx.ops.post_send = FakePostSend;
    f.ctx.ops.post_recv = FakePostRecv;
    f.ctx.ops.post_srq_recv = FakePostSrqRecv;
    f.ctx.ops.poll_cq = FakePollCq;
    f.ctx.ops.req_notify_cq = FakeReqNotifyCq;
    f.pd.context = &f.ctx;
    f.qp.context = &f.ctx;
    f.srq.context = &f.ctx;
    f.send_cq.context = &f.ctx;
    f.recv_cq.context = &f.ctx;
    f.mr.context = &f.ctx;
    f.mr.pd = &f.pd;
    f.mr.addr = f.buf;
    f.mr.length = sizeof f.buf;
    f.mr.lkey = 0x1111;
    f.mr.rkey = 0x2222;
    f.id.verbs = &f.ctx;
    f.id.qp = &f.qp;
    f.id.pd = &f.pd;
    f.id.send_cq = &f.send_cq;
    f.id.recv_cq = &f.recv_cq;
    f.id.send_cq_channel = &f.send_ch;
    f.id.recv_cq_channel = &f.recv_ch;
  }
  void TearDown() override {
    g_fake = nullptr;
    delete f_;
  }

  // Runs `scenario` once through each header set from identical fake state;
  // the two transcripts must be equal.
  template <typename Scenario>
  void Compare(Scenario scenario) {
    std::vector<std::string> out[2];
    const inline_api* apis[2] = {&abi_inline_ref, &abi_inline_ours};
    for (int i = 0; i < 2; ++i) {
      TearDown();
      SetUp();
      scenario(*apis[i], *f_);
      out[i] = f_->log;
    }
    EXPECT_FALSE(out[0].empty());
    size_t n = std::max(out[0].size(), out[1].size());
    for (size_t i = 0; i < n; ++i) {
      std::string r = i < out[0].size() ? out[0][i] : "(nothing)";
      std::string o = i < out[1].size() ? out[1][i] : "(nothing)";
      if (r != o) {
        ADD_FAILURE() << "behaviour differs at step " << i
                      << "\n  rdma-core 44: " << r << "\n  ours:         " << o;
        break;
      }
    }
  }

  Fake* f_ = nullptr;
};

void Result(Fake& f, const char* what, int ret) {
  f.log.push_back(std::string(what) + " = " + std::to_string(ret) +
                  (ret == -1 ? " errno=" + std::to_string(errno) : ""));
}

}  // namespace

// Non-inline libibverbs entry points used by the helpers.  The names are
// parenthesised because verbs.h also defines ibv_reg_mr as a macro.
extern "C" {

struct ibv_mr*(ibv_reg_mr)(struct ibv_pd* pd, void* addr, size_t length,
                           int access) {
  g_fake->log.push_back("ibv_reg_mr " + Name(pd) + " " + Name(addr) + " " +
                        std::to_string(length) + " access=" +
                        std::to_string(access));
  if (g_fake->reg_fails) {
    errno = ENOMEM;
    return nullptr;
  }
  return &g_fake->mr;
}

struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length,
                                uint64_t iova, unsigned int access) {
  g_fake->log.push_back("ibv_reg_mr_iova2 " + Name(pd) + " " + Name(addr) +
                        " " + std::to_string(length) + " iova=" + Addr(iova) +
                        " access=" + std::to_string(access));
  return &g_fake->mr;
}

int ibv_dereg_mr(struct ibv_mr* mr) {
  g_fake->log.push_back("ibv_dereg_mr " + Name(mr));
  return g_fake->dereg_result;
}

int ibv_get_cq_event(struct ibv_comp_channel* channel, struct ibv_cq** cq,
                     void** cq_context) {
  int r = Next(g_fake->event_results, "ibv_get_cq_event");
  g_fake->log.push_back("ibv_get_cq_event " + Name(channel) + " -> " +
                        std::to_string(r));
  if (r) {
    errno = EAGAIN;
    return r;
  }
  *cq = channel == &g_fake->send_ch ? &g_fake->send_cq : &g_fake->recv_cq;
  *cq_context = &g_fake->id;
  return 0;
}

void ibv_ack_cq_events(struct ibv_cq* cq, unsigned int nevents) {
  g_fake->log.push_back("ibv_ack_cq_events " + Name(cq) + " " +
                        std::to_string(nevents));
}

}  // extern "C"

TEST_F(InlineBehaviour, SetErrno) {
  Compare([](const inline_api& api, Fake& f) {
    for (int v : {0, 1, EINVAL, ENOMEM, -1, -7}) {
      errno = 4242;
      int r = api.seterrno(v);
      f.log.push_back(std::to_string(v) + " -> " + std::to_string(r) +
                      " errno=" + std::to_string(errno));
    }
  });
  errno = 0;
  EXPECT_EQ(abi_inline_ours.seterrno(0), 0);
  EXPECT_EQ(abi_inline_ours.seterrno(EIO), -1);
  EXPECT_EQ(errno, EIO);
}

TEST_F(InlineBehaviour, LocalAndPeerAddr) {
  Compare([](const inline_api& api, Fake& f) {
    const auto* base = reinterpret_cast<const char*>(&f.id);
    f.log.push_back(
        "local at " +
        std::to_string(reinterpret_cast<const char*>(api.get_local_addr(&f.id)) -
                       base));
    f.log.push_back(
        "peer at " +
        std::to_string(reinterpret_cast<const char*>(api.get_peer_addr(&f.id)) -
                       base));
  });
  EXPECT_EQ(abi_inline_ours.get_local_addr(&f_->id), &f_->id.route.addr.src_addr);
  EXPECT_EQ(abi_inline_ours.get_peer_addr(&f_->id), &f_->id.route.addr.dst_addr);
}

TEST_F(InlineBehaviour, RegisterAndDeregister) {
  Compare([](const inline_api& api, Fake& f) {
    f.log.push_back("msgs -> " + Name(api.reg_msgs(&f.id, f.buf, 64)));
    f.log.push_back("read -> " + Name(api.reg_read(&f.id, f.buf + 8, 32)));
    f.log.push_back("write -> " + Name(api.reg_write(&f.id, f.buf + 16, 16)));
    f.reg_fails = true;
    errno = 0;
    f.log.push_back("failing -> " + Name(api.reg_msgs(&f.id, f.buf, 1)) +
                    " errno=" + std::to_string(errno));
    Result(f, "dereg ok", api.dereg_mr(&f.mr));
    f.dereg_result = EBUSY;
    Result(f, "dereg busy", api.dereg_mr(&f.mr));
  });
}

TEST_F(InlineBehaviour, VectoredPosts) {
  Compare([](const inline_api& api, Fake& f) {
    ibv_sge sgl[2] = {{reinterpret_cast<uintptr_t>(f.buf), 8, 5},
                      {reinterpret_cast<uintptr_t>(f.buf + 100), 20, 6}};
    Result(f, "recvv qp", api.post_recvv(&f.id, f.buf + 1, sgl, 2));
    f.id.srq = &f.srq;
    Result(f, "recvv srq", api.post_recvv(&f.id, f.buf + 2, sgl, 1));
    f.post_result = ENOMEM;
    Result(f, "recvv srq fails", api.post_recvv(&f.id, nullptr, sgl, 2));
    f.post_result = 0;
    Result(f, "sendv", api.post_sendv(&f.id, f.buf + 3, sgl, 2,
                                      IBV_SEND_SIGNALED | IBV_SEND_INLINE));
    f.view = WrView::kRdma;
    Result(f, "readv", api.post_readv(&f.id, f.buf + 4, sgl, 1,
                                      IBV_SEND_SIGNALED, 0x123456789abcULL, 99));
    Result(f, "writev", api.post_writev(&f.id, f.buf + 5, sgl, 2, 0,
                                        0xfedcba9876ULL, 0xffffffffu));
    f.post_result = EINVAL;
    Result(f, "writev fails", api.post_writev(&f.id, nullptr, sgl, 2, 0, 1, 2));
  });
}

TEST_F(InlineBehaviour, SimplePosts) {
  Compare([](const inline_api& api, Fake& f) {
    Result(f, "recv", api.post_recv(&f.id, f.buf + 7, f.buf + 10, 100, &f.mr));
    Result(f, "recv whole mr", api.post_recv(&f.id, nullptr, f.buf,
                                             sizeof f.buf, &f.mr));
    Result(f, "send", api.post_send(&f.id, f.buf + 8, f.buf + 20, 30, &f.mr,
                                    IBV_SEND_SIGNALED));
    Result(f, "send no mr", api.post_send(&f.id, nullptr, f.buf, 4, nullptr,
                                          IBV_SEND_INLINE));
    f.view = WrView::kRdma;
    Result(f, "read", api.post_read(&f.id, f.buf + 9, f.buf + 40, 50, &f.mr,
                                    0, 0x1000, 7));
    Result(f, "write", api.post_write(&f.id, f.buf + 10, f.buf + 60, 70,
                                      &f.mr, IBV_SEND_SIGNALED, 0x2000, 8));
    Result(f, "write no mr", api.post_write(&f.id, nullptr, f.buf, 4, nullptr,
                                            IBV_SEND_INLINE, 0x3000, 9));
    f.view = WrView::kUd;
    Result(f, "ud send", api.post_ud_send(&f.id, f.buf + 11, f.buf + 80, 90,
                                          &f.mr, 0, &f.ah, 0xabcdef));
    Result(f, "ud send no mr", api.post_ud_send(&f.id, nullptr, f.buf, 4,
                                                nullptr, IBV_SEND_INLINE,
                                                &f.ah, 1));
    f.post_result = ENOSPC;
    f.view = WrView::kPlain;
    Result(f, "send fails", api.post_send(&f.id, nullptr, f.buf, 4, &f.mr, 0));
  });
}

// Completion helpers: every path through the poll / arm / re-poll / wait loop.
class CompletionScript {
 public:
  std::vector<int> poll, notify, event;
};

static void RunComp(const inline_api& api, Fake& f, bool send,
                    const CompletionScript& s, const char* what) {
  f.poll_results.assign(s.poll.begin(), s.poll.end());
  f.notify_results.assign(s.notify.begin(), s.notify.end());
  f.event_results.assign(s.event.begin(), s.event.end());
  ibv_wc wc{};
  errno = 0;
  int r = send ? api.get_send_comp(&f.id, &wc) : api.get_recv_comp(&f.id, &wc);
  Result(f, what, r);
  if (r > 0) f.log.push_back("wc.wr_id=" + std::to_string(wc.wr_id));
  if (!f.poll_results.empty() || !f.notify_results.empty() ||
      !f.event_results.empty())
    f.log.push_back("script not consumed");
}

static void CompletionPaths(const inline_api& api, Fake& f, bool send) {
  RunComp(api, f, send, {{1}, {}, {}}, "ready");
  RunComp(api, f, send, {{0, 1}, {0}, {}}, "ready after arming");
  RunComp(api, f, send, {{0, 0, 1}, {0}, {0}}, "after one event");
  RunComp(api, f, send, {{0, 0, 0, 0, 1}, {0, 0}, {0, 0}}, "after two events");
  RunComp(api, f, send, {{0}, {EIO}, {}}, "arming fails");
  RunComp(api, f, send, {{-5}, {}, {}}, "poll fails");
  RunComp(api, f, send, {{0, -2}, {0}, {}}, "re-poll fails");
  RunComp(api, f, send, {{0, 0}, {0}, {-1}}, "event wait fails");
}

TEST_F(InlineBehaviour, GetSendComp) {
  Compare([](const inline_api& api, Fake& f) { CompletionPaths(api, f, true); });
}

TEST_F(InlineBehaviour, GetRecvComp) {
  Compare([](const inline_api& api, Fake& f) { CompletionPaths(api, f, false); });
}

TEST_F(InlineBehaviour, IbAddrHelpers) {
  Compare([](const inline_api& api, Fake& f) {
    ib_addr a[6];
    std::memset(a, 0, sizeof a);
    api.ib_addr_set(&a[1], 0, 0, 0, htobe32(1));          // ::1
    api.ib_addr_set(&a[2], 0, 0, 0, 1);                   // 1 in host order
    api.ib_addr_set(&a[3], htobe32(0xfe800000), 0, 0, htobe32(1));
    api.ib_addr_set(&a[4], 1, 2, 3, 4);
    std::memset(&a[5], 0xff, sizeof a[5]);
    for (int i = 0; i < 6; ++i) {
      std::ostringstream os;
      os << "addr" << i << " any=" << api.ib_addr_any(&a[i])
         << " loopback=" << api.ib_addr_loopback(&a[i]) << " cmp=";
      for (int j = 0; j < 6; ++j) {
        int c = api.ib_addr_cmp(&a[i], &a[j]);
        os << (c < 0 ? "<" : c > 0 ? ">" : "=");
      }
      os << " words=" << a[i].sib_addr32[0] << "," << a[i].sib_addr32[1] << ","
         << a[i].sib_addr32[2] << "," << a[i].sib_addr32[3];
      f.log.push_back(os.str());
    }
  });
  ib_addr lo{};
  abi_inline_ours.ib_addr_set(&lo, 0, 0, 0, htobe32(1));
  EXPECT_EQ(abi_inline_ours.ib_addr_loopback(&lo), 1);
  EXPECT_EQ(abi_inline_ours.ib_addr_any(&lo), 0);
}
