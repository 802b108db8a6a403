// Event channels and events: rdma_create/destroy_event_channel,
// rdma_get_cm_event, rdma_ack_cm_event, rdma_event_str.
#include <fcntl.h>
#include <unistd.h>

#include "table.h"

namespace rdmacm::misuse {

void add_channel_rows(std::vector<Row>& rows) {
  const char* stale = "ours validates every handle against its live objects";
  rows.push_back({"destroy_event_channel(NULL)", "void EINVAL",
                  [](State&) { rdma_destroy_event_channel(nullptr); return none(); }, stale});
  rows.push_back({"destroy_event_channel(destroyed)", "void EINVAL",
                  [](State& s) { auto* ch = s.dead_channel(); reset_errno();
                                 rdma_destroy_event_channel(ch); return none(); }, stale});
  rows.push_back({"destroy_event_channel(forged)", "void EINVAL",
                  [](State& s) { rdma_destroy_event_channel(s.forged_channel()); return none(); }, stale});
  rows.push_back({"destroy_event_channel(in use by an id)", "void",
                  [](State& s) { s.fresh(); rdma_destroy_event_channel(s.channel()); return none(); }});

  rows.push_back({"get_cm_event(NULL channel)", "-1 EINVAL",
                  [](State&) { rdma_cm_event* ev; return ret(rdma_get_cm_event(nullptr, &ev)); }, stale});
  rows.push_back({"get_cm_event(NULL event)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_get_cm_event(s.channel(), nullptr)); }});
  rows.push_back({"get_cm_event(destroyed channel)", "-1 EINVAL",
                  [](State& s) { auto* ch = s.dead_channel(); rdma_cm_event* ev;
                                 reset_errno(); return ret(rdma_get_cm_event(ch, &ev)); }, stale});
  rows.push_back({"get_cm_event(forged channel)", "-1 EINVAL",
                  [](State& s) { rdma_cm_event* ev;
                                 return ret(rdma_get_cm_event(s.forged_channel(), &ev)); }, stale});
  rows.push_back({"get_cm_event(non-blocking, empty)", "-1 EAGAIN",
                  [](State& s) {
                    auto* ch = s.channel();
                    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
                    rdma_cm_event* ev;
                    return ret(rdma_get_cm_event(ch, &ev)); }});
  rows.push_back({"get_cm_event(channel fd closed by the application)", "-1 EBADF",
                  [](State& s) { auto* ch = s.channel(); close(ch->fd); rdma_cm_event* ev;
                                 return ret(rdma_get_cm_event(ch, &ev)); }});

  rows.push_back({"ack_cm_event(NULL)", "-1 EINVAL",
                  [](State&) { return ret(rdma_ack_cm_event(nullptr)); }, stale});
  rows.push_back({"ack_cm_event(acked twice)", "-1 EINVAL",
                  [](State& s) { auto* ev = s.acked_event(); reset_errno();
                                 return ret(rdma_ack_cm_event(ev)); }, stale});
  rows.push_back({"ack_cm_event(forged)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_ack_cm_event(s.forged_event())); }, stale});

  for (int e : {-1, 20, 21, 1000, 0x7fffffff}) {
    rows.push_back({"event_str(" + std::to_string(e) + ")", "UNKNOWN EVENT",
                    [e](State&) { return std::string(rdma_event_str(static_cast<rdma_cm_event_type>(e))); }});
  }
}

}  // namespace rdmacm::misuse
