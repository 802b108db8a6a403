// A scripted stand-in for the kernel's rdma_cm, for fault injection and bad
// input tests. Each channel is a real eventfd (so it can be polled and set
// non-blocking); events are queued per channel by the test.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <vector>

#include "core/transport.h"

namespace rdmacm::testing {

using namespace rdmacm::core;

// The fake kernel's commands: one per Transport method, by which tests
// inject faults, script replies and read the command log. An enum, not
// strings, so that a misspelt or renamed command fails to compile instead
// of silently never matching.
enum class Cmd {
  open_channel,
  create_id,
  destroy_id,
  bind,
  resolve_addr,
  query_addr,
  query_gid,
  get_event,
  resolve_route,
  query_path,
  connect,
  listen,
  accept,
  reject,
  disconnect,
  init_qp_attr,
  notify,
  set_option,
  migrate_id,
  join_mcast,
  leave_mcast,
};

// Every command, in declaration order.
inline constexpr Cmd kAllCmds[] = {
    Cmd::open_channel, Cmd::create_id,    Cmd::destroy_id,  Cmd::bind,
    Cmd::resolve_addr, Cmd::query_addr,   Cmd::query_gid,   Cmd::get_event,
    Cmd::resolve_route, Cmd::query_path,  Cmd::connect,     Cmd::listen,
    Cmd::accept,       Cmd::reject,       Cmd::disconnect,  Cmd::init_qp_attr,
    Cmd::notify,       Cmd::set_option,   Cmd::migrate_id,  Cmd::join_mcast,
    Cmd::leave_mcast,
};

// The command's name, as the Transport method is called (for messages).
const char* name(Cmd command);
// For GoogleTest's messages and SCOPED_TRACE.
inline std::ostream& operator<<(std::ostream& os, Cmd command) { return os << name(command); }

class FakeTransport : public Transport {
 public:
  FakeTransport() { set_transport(this); }
  ~FakeTransport() { set_transport(nullptr); }

  // Makes the next call of this command (Cmd::create_id, ...) fail.
  void fail_next(Cmd command, int err);
  // Queues an event on the channel fd for the id created with this uid.
  void queue_event(int fd, uint64_t uid, uint32_t event, int32_t status);
  // Queues a connection request on the listener's channel, as the kernel
  // does: a new kernel id (known by handle only) reported against the
  // listener's uid. Returns the new handle.
  uint32_t queue_request(int fd, uint64_t listener_uid);
  // Queues an event exactly as given: any type, status, uid, handle and
  // parameters, as a misbehaving kernel might. Only a connection request's
  // handle is replaced by a new kernel id, since the kernel makes one for
  // every request (a handle it already uses would be no kernel's answer).
  // Returns the handle queued.
  uint32_t queue_raw(int fd, ucma_abi_event_resp w);
  // The kernel ids alive: handle -> the uid they were created with.
  std::map<uint32_t, uint64_t> kernel_ids() const;
  // Events the kernel would count as reported for this id (delivered by
  // get_event), as destroy_id answers.
  uint32_t reported(uint32_t id) const;
  // Kernel ids currently alive.
  size_t live_ids() const;
  // The address query answer for every id.
  ucma_abi_query_addr_resp addr{};
  // The GIDs query_gid answers for every id (zeros unless a test sets them).
  uint8_t sgid[16]{}, dgid[16]{};
  // When set, resolve_addr queues ADDR_RESOLVED for the id at once (as the
  // kernel does for the loopback address).
  bool resolve_reports = false;
  // Runs at the start of destroy_id, as if another thread acted right then.
  std::function<void()> on_destroy;
  // Likewise at the start of create_id.
  std::function<void()> on_create;
  // When set, migrate_id moves the id's queued events to the new channel,
  // as the kernel does (the event pump fuzzer models one that does not).
  bool migrate_moves_events = false;
  // Runs once get_event has taken an event from its queue (the kernel has
  // counted it as reported), before the library sees it: as if another
  // thread acted between the two.
  std::function<void()> on_get_event;
  // Makes the nth command from now on (1: the next one) fail with err,
  // whatever command that is: a fault at one step of an operation.
  void fail_nth(size_t n, int err);
  // Every command issued so far, in order, failed ones included.
  std::vector<Cmd> commands() const;
  // After each successful call of this command, queues this event (status 0)
  // for its id on the channel the command came through, as the kernel
  // reports the outcome of resolve_route, connect, accept, disconnect or a
  // join (whose event is the group's).
  void reply(Cmd command, uint32_t event);
  // The same, the event carrying this private data (a CONNECT_RESPONSE's:
  // what the peer accepted with), at most RDMA_MAX_PRIVATE_DATA bytes.
  void reply(Cmd command, uint32_t event, const std::vector<uint8_t>& private_data);

  int open_channel() override;
  int create_id(int fd, uint64_t uid, uint16_t ps, uint8_t qp_type,
                uint32_t* id) override;
  int destroy_id(int fd, uint32_t id, uint32_t* events_reported) override;
  int bind(int fd, uint32_t id, const sockaddr* addr, socklen_t len) override;
  int resolve_addr(int fd, uint32_t id, const sockaddr* src, socklen_t src_len,
                   const sockaddr* dst, socklen_t dst_len,
                   uint32_t timeout_ms) override;
  int query_addr(int fd, uint32_t id, ucma_abi_query_addr_resp* out) override;
  int query_gid(int fd, uint32_t id, uint8_t sgid[16], uint8_t dgid[16]) override;
  int get_event(int fd, ucma_abi_event_resp* out) override;
  int resolve_route(int fd, uint32_t id, uint32_t timeout_ms) override;
  int query_path(int fd, uint32_t id, ibv_path_data* out, size_t* n) override;
  int connect(int fd, uint32_t id, const ucma_abi_conn_param& param,
              const ucma_abi_ece& ece) override;
  int listen(int fd, uint32_t id, int backlog) override;
  int accept(int fd, uint32_t id, uint64_t uid, const ucma_abi_conn_param& param,
             const ucma_abi_ece& ece) override;
  int reject(int fd, uint32_t id, const void* private_data,
             uint8_t private_data_len, uint8_t reason) override;
  int disconnect(int fd, uint32_t id) override;
  int init_qp_attr(int fd, uint32_t id, ibv_qp_state state, ibv_qp_attr* attr,
                   int* mask) override;
  int notify(int fd, uint32_t id, uint32_t event) override;
  int set_option(int fd, uint32_t id, int level, int name, const void* value,
                 size_t len) override;
  int migrate_id(int new_fd, uint32_t id, int old_fd,
                 uint32_t* events_reported) override;
  int join_mcast(int fd, uint32_t id, uint64_t uid, const sockaddr* addr,
                 socklen_t len, uint16_t join_flags, uint32_t* mc_handle) override;
  int leave_mcast(int fd, uint32_t mc_handle, uint32_t* events_reported) override;

  // The last connection parameters handed to connect or accept.
  ucma_abi_conn_param last_conn{};
  // The last handed to connect alone (an active side's accept, completing
  // its connection, replaces last_conn).
  ucma_abi_conn_param last_connect{};
  // The path records query_path answers for every id (an SA's answer on
  // InfiniBand); none at start.
  std::vector<ibv_path_data> paths;
  // The last option handed to set_option (RDMA_OPTION_IB_PATH: the records).
  struct Option {
    int level = -1, name = -1;
    std::vector<uint8_t> value;
  } last_option;
  // The uid the library gave the last join: the kernel reports the group's
  // events (MULTICAST_JOIN, MULTICAST_ERROR) against it.
  uint64_t last_join_uid = 0;

 private:
  int injected(Cmd command);
  // Takes the hook (under mutex_) and runs it (without).
  void run_once(std::function<void()>& hook);
  // Common body of the commands that only act on a live id.
  int simple(Cmd command, uint32_t id);
  // Appends to the channel's queue and wakes it (mutex_ held).
  void push(int fd, const ucma_abi_event_resp& w);
  // The kernel counts delivered events per id: by uid, or by handle for an
  // id the application has not given a uid yet (a request's before accept).
  static uint64_t counted(uint64_t uid, uint32_t id) { return uid ? uid : 1ull << 63 | id; }
  // Whether a queued event is the id's, as the kernel tracks them: by id, a
  // request by its listener, a group's by the group (mutex_ held).
  bool owns(uint32_t id, const ucma_abi_event_resp& w) const;
  // Drops the queued events of an id being destroyed (mutex_ held).
  void purge(int fd, uint32_t id);
  // Queues the reply set for command, if any, once it succeeded (err 0);
  // uid 0: the id's own.
  int replied(Cmd command, int fd, uint32_t id, uint64_t uid, int err);

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<Cmd, int> failures_;
  std::map<int, std::deque<ucma_abi_event_resp>> queues_;  // by channel fd
  std::map<uint32_t, uint64_t> ids_;             // kernel id -> uid
  std::map<uint64_t, uint32_t> delivered_;       // counted() -> events delivered
  std::map<uint32_t, uint64_t> groups_;          // joined: mc handle -> uid
  uint32_t next_id_ = 1;
  ucma_abi_query_addr_resp addr_{};  // what bind/resolve recorded
  std::vector<Cmd> log_;          // every command issued
  size_t fail_at_ = 0;            // the log_ size at which to fail
  int fail_err_ = 0;
  std::map<Cmd, uint32_t> replies_;  // command -> event it queues
  std::map<Cmd, std::vector<uint8_t>> reply_data_;  // and its private data
};

}  // namespace rdmacm::testing
