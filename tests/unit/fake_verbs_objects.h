// Inside the fake device (fake_verbs.cpp, fake_data_path.cpp): its objects
// and their count. Not for tests: they use fake_verbs.h.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>

#include "fake_verbs.h"

namespace rdmacm::testing::fake {

// QPs, CQs, completion channels, MRs and address handles alive.
extern std::atomic<size_t> objects;

template <typename T>
T* make() {
  ++objects;
  return new T{};
}

template <typename T>
int release(T* object) {
  --objects;
  delete object;
  return 0;
}

// One lock for the whole data path (a leaf: nothing is called under it).
extern std::mutex data_mutex;

// A completion channel: a semaphore eventfd, one count per CQ event, as
// ibv_get_cq_event reads them; the CQs with an event not taken yet, in order.
struct Channel : ibv_comp_channel {
  std::deque<ibv_cq*> events;
};

struct Cq : ibv_cq {
  std::deque<ibv_wc> completions;
  bool armed = false;        // ibv_req_notify_cq: the next completion raises an event
  unsigned events = 0;       // events raised on its channel
  unsigned taken = 0;        // of which ibv_get_cq_event took
  unsigned acked = 0;        // and ibv_ack_cq_events acknowledged
};

struct Qp : ibv_qp {
  std::deque<uint64_t> recvs;        // posted receives' wr_id, oldest first
  std::deque<FakeSend> sends;        // posted, not completed yet
  std::deque<FakeSend> unseen;       // posted, not taken by fake_take_posted yet
  int max_recv_wr = 0;
  bool auto_complete = false;        // fake_auto_complete
  bool sig_all = true;               // sq_sig_all: else a send completes fine only if signalled
};

// The device's ops (poll_cq, req_notify_cq, post_send, post_recv).
void set_data_path_ops(ibv_context_ops* ops);
// A QP moved to IBV_QPS_ERR: what was posted completes with IBV_WC_WR_FLUSH_ERR.
void flush(Qp* qp);

}  // namespace rdmacm::testing::fake
