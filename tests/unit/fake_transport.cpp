#include "fake_transport.h"

#include "../common/time_scale.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace rdmacm::testing {

const char* name(Cmd command) {
  switch (command) {  // no default: -Wswitch names a command left out
    case Cmd::open_channel: return "open_channel";
    case Cmd::create_id: return "create_id";
    case Cmd::destroy_id: return "destroy_id";
    case Cmd::bind: return "bind";
    case Cmd::resolve_addr: return "resolve_addr";
    case Cmd::query_addr: return "query_addr";
    case Cmd::query_gid: return "query_gid";
    case Cmd::get_event: return "get_event";
    case Cmd::resolve_route: return "resolve_route";
    case Cmd::query_path: return "query_path";
    case Cmd::connect: return "connect";
    case Cmd::listen: return "listen";
    case Cmd::accept: return "accept";
    case Cmd::reject: return "reject";
    case Cmd::disconnect: return "disconnect";
    case Cmd::init_qp_attr: return "init_qp_attr";
    case Cmd::notify: return "notify";
    case Cmd::set_option: return "set_option";
    case Cmd::migrate_id: return "migrate_id";
    case Cmd::join_mcast: return "join_mcast";
    case Cmd::leave_mcast: return "leave_mcast";
  }
  return "(not a command)";
}

int FakeTransport::injected(Cmd command) {
  log_.push_back(command);
  if (log_.size() == fail_at_) {
    fail_at_ = 0;
    return -fail_err_;
  }
  auto it = failures_.find(command);
  if (it == failures_.end()) return 0;
  int err = it->second;
  failures_.erase(it);
  return -err;
}

void FakeTransport::fail_next(Cmd command, int err) {
  std::lock_guard lock(mutex_);
  failures_[command] = err;
}

void FakeTransport::fail_nth(size_t n, int err) {
  std::lock_guard lock(mutex_);
  fail_at_ = log_.size() + n;
  fail_err_ = err;
}

std::vector<Cmd> FakeTransport::commands() const {
  std::lock_guard lock(mutex_);
  return log_;
}

void FakeTransport::reply(Cmd command, uint32_t event) {
  std::lock_guard lock(mutex_);
  replies_[command] = event;
  reply_data_.erase(command);
}

void FakeTransport::reply(Cmd command, uint32_t event, const std::vector<uint8_t>& private_data) {
  std::lock_guard lock(mutex_);
  replies_[command] = event;
  reply_data_[command] = private_data;
}

int FakeTransport::replied(Cmd command, int fd, uint32_t id, uint64_t uid, int err) {
  std::lock_guard lock(mutex_);
  auto it = replies_.find(command);
  if (err || it == replies_.end()) return err;
  auto known = ids_.find(id);
  ucma_abi_event_resp w{};
  w.uid = uid ? uid : known == ids_.end() ? 0 : known->second;
  w.id = id;
  w.event = it->second;
  if (auto data = reply_data_.find(command); data != reply_data_.end()) {
    size_t len = std::min(data->second.size(), sizeof(w.param.conn.private_data));
    if (len) std::memcpy(w.param.conn.private_data, data->second.data(), len);
    w.param.conn.private_data_len = static_cast<uint8_t>(len);
  }
  push(fd, w);
  return 0;
}

void FakeTransport::queue_event(int fd, uint64_t uid, uint32_t event, int32_t status) {
  std::lock_guard lock(mutex_);
  ucma_abi_event_resp w{};
  w.uid = uid;
  w.event = event;
  w.status = status;
  for (auto& [id, u] : ids_)
    if (u == uid) w.id = id;
  push(fd, w);
}

uint32_t FakeTransport::queue_request(int fd, uint64_t listener_uid) {
  // One critical section: a reader may take the event as soon as it is queued.
  std::lock_guard lock(mutex_);
  ucma_abi_event_resp w{};
  w.uid = listener_uid;
  w.id = next_id_++;
  w.event = 4;  // RDMA_CM_EVENT_CONNECT_REQUEST
  ids_[w.id] = 0;
  push(fd, w);
  return w.id;
}

uint32_t FakeTransport::queue_raw(int fd, ucma_abi_event_resp w) {
  std::lock_guard lock(mutex_);
  if (w.event == 4 /* RDMA_CM_EVENT_CONNECT_REQUEST */) {
    w.id = next_id_++;
    ids_[w.id] = 0;
  }
  push(fd, w);
  return w.id;
}

void FakeTransport::push(int fd, const ucma_abi_event_resp& w) {
  queues_[fd].push_back(w);
  uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));  // make the fd readable
  cv_.notify_all();
}

std::map<uint32_t, uint64_t> FakeTransport::kernel_ids() const {
  std::lock_guard lock(mutex_);
  return ids_;
}

uint32_t FakeTransport::reported(uint32_t id) const {
  std::lock_guard lock(mutex_);
  auto it = ids_.find(id);
  if (it == ids_.end()) return 0;
  auto d = delivered_.find(counted(it->second, id));
  return d == delivered_.end() ? 0 : d->second;
}

size_t FakeTransport::live_ids() const {
  std::lock_guard lock(mutex_);
  return ids_.size();
}

int FakeTransport::open_channel() {
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::open_channel)) return err;
  int fd = ::eventfd(0, EFD_CLOEXEC);
  if (fd < 0) return -errno;
  queues_.erase(fd);  // a new channel starts empty, whatever an old fd left
  return fd;
}

int FakeTransport::create_id(int, uint64_t uid, uint16_t, uint8_t, uint32_t* id) {
  run_once(on_create);
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::create_id)) return err;
  *id = next_id_++;
  ids_[*id] = uid;
  return 0;
}

void FakeTransport::run_once(std::function<void()>& hook) {
  std::function<void()> now;
  {
    std::lock_guard lock(mutex_);  // another thread may be in a command too
    now = std::exchange(hook, nullptr);
  }
  if (now) now();
}

int FakeTransport::destroy_id(int fd, uint32_t id, uint32_t* events_reported) {
  run_once(on_destroy);
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::destroy_id)) return err;
  auto it = ids_.find(id);
  if (it == ids_.end()) return -EINVAL;
  *events_reported = delivered_[counted(it->second, id)];
  delivered_.erase(counted(it->second, id));
  purge(fd, id);
  ids_.erase(id);
  return 0;
}

bool FakeTransport::owns(uint32_t id, const ucma_abi_event_resp& w) const {
  if (w.event == 4 /* RDMA_CM_EVENT_CONNECT_REQUEST */) {
    auto it = ids_.find(id);
    return it != ids_.end() && it->second && w.uid == it->second;
  }
  auto group = groups_.find(1000 + id);
  return w.id == id || (group != groups_.end() && w.uid == group->second);
}

void FakeTransport::purge(int fd, uint32_t id) {
  // As the kernel does: the id's events not yet read (all on its channel)
  // go with it, and its pending requests with their new ids.
  auto& q = queues_[fd];
  bool had = !q.empty();
  std::erase_if(q, [&](const ucma_abi_event_resp& w) {
    if (!owns(id, w)) return false;
    if (w.event == 4 /* RDMA_CM_EVENT_CONNECT_REQUEST */) ids_.erase(w.id);
    return true;
  });
  uint64_t count;
  if (had && q.empty()) (void)!::read(fd, &count, sizeof(count));
  groups_.erase(1000 + id);
}

int FakeTransport::bind(int, uint32_t id, const sockaddr* addr, socklen_t len) {
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::bind)) return err;
  if (!ids_.count(id)) return -EINVAL;
  std::memcpy(&addr_.src_addr, addr, len);
  return 0;
}

int FakeTransport::resolve_addr(int fd, uint32_t id, const sockaddr*, socklen_t,
                                const sockaddr* dst, socklen_t dst_len, uint32_t) {
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::resolve_addr)) return err;
  if (!ids_.count(id)) return -EINVAL;
  std::memcpy(&addr_.dst_addr, dst, dst_len);
  if (!resolve_reports) return 0;
  ucma_abi_event_resp w{};
  w.uid = ids_[id];
  w.id = id;  // by handle: a request's id has no uid yet (uid 0)
  w.event = 0;  // RDMA_CM_EVENT_ADDR_RESOLVED
  push(fd, w);
  return 0;
}

int FakeTransport::query_addr(int, uint32_t id, ucma_abi_query_addr_resp* out) {
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::query_addr)) return err;
  if (!ids_.count(id)) return -EINVAL;
  *out = addr;
  out->src_addr = addr_.src_addr;
  out->dst_addr = addr_.dst_addr;
  return 0;
}

int FakeTransport::query_gid(int, uint32_t id, uint8_t out_sgid[16], uint8_t out_dgid[16]) {
  if (int err = simple(Cmd::query_gid, id)) return err;
  std::memcpy(out_sgid, sgid, 16);
  std::memcpy(out_dgid, dgid, 16);
  return 0;
}

int FakeTransport::get_event(int fd, ucma_abi_event_resp* out) {
  std::unique_lock lock(mutex_);
  if (int err = injected(Cmd::get_event)) return err;
  auto& q = queues_[fd];
  if (q.empty()) {
    if (::fcntl(fd, F_GETFL) & O_NONBLOCK) return -EAGAIN;
    // Blocking, like the kernel; bounded so a broken test fails, not hangs.
    if (!cv_.wait_for(lock, test::scaled(std::chrono::seconds(10)), [&] { return !q.empty(); }))
      return -ETIMEDOUT;
  }
  *out = q.front();
  q.pop_front();
  uint64_t count;
  if (q.empty()) (void)!::read(fd, &count, sizeof(count));
  ++delivered_[counted(out->uid, out->id)];
  if (on_get_event) {
    auto hook = std::exchange(on_get_event, nullptr);
    lock.unlock();
    hook();
  }
  return 0;
}

int FakeTransport::simple(Cmd command, uint32_t id) {
  std::lock_guard lock(mutex_);
  if (int err = injected(command)) return err;
  return ids_.count(id) ? 0 : -EINVAL;
}

int FakeTransport::resolve_route(int fd, uint32_t id, uint32_t) {
  return replied(Cmd::resolve_route, fd, id, 0, simple(Cmd::resolve_route, id));
}

int FakeTransport::query_path(int, uint32_t id, ibv_path_data* out, size_t* n) {
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::query_path)) return err;
  if (!ids_.count(id)) return -EINVAL;
  *n = std::min(*n, paths.size());  // as the kernel: what fits the caller's room
  std::copy_n(paths.begin(), *n, out);
  return 0;
}

int FakeTransport::connect(int fd, uint32_t id, const ucma_abi_conn_param& param, const ucma_abi_ece&) {
  {
    std::lock_guard lock(mutex_);
    last_conn = last_connect = param;
  }
  return replied(Cmd::connect, fd, id, 0, simple(Cmd::connect, id));
}

int FakeTransport::listen(int, uint32_t id, int) { return simple(Cmd::listen, id); }

int FakeTransport::accept(int fd, uint32_t id, uint64_t uid, const ucma_abi_conn_param& param,
                          const ucma_abi_ece&) {
  {
    std::lock_guard lock(mutex_);
    last_conn = param;
  }
  int err = simple(Cmd::accept, id);
  if (!err && uid) {
    // The kernel gives a request's id the application's uid here; what it
    // reported so far stays counted for the id.
    std::lock_guard lock(mutex_);
    auto it = ids_.find(id);
    if (it != ids_.end() && !it->second) {
      delivered_[uid] += delivered_[counted(0, id)];
      delivered_.erase(counted(0, id));
      it->second = uid;
    }
  }
  // Only the passive side's accept has an answer (ESTABLISHED); the active
  // side's (uid 0) completes a connection the library reports itself.
  return uid ? replied(Cmd::accept, fd, id, 0, err) : err;
}

int FakeTransport::reject(int, uint32_t id, const void*, uint8_t, uint8_t) {
  return simple(Cmd::reject, id);
}

int FakeTransport::disconnect(int fd, uint32_t id) {
  return replied(Cmd::disconnect, fd, id, 0, simple(Cmd::disconnect, id));
}

int FakeTransport::init_qp_attr(int, uint32_t id, ibv_qp_state state, ibv_qp_attr* attr,
                                int* mask) {
  *attr = {};
  attr->qp_state = state;
  *mask = IBV_QP_STATE;
  return simple(Cmd::init_qp_attr, id);
}

int FakeTransport::notify(int, uint32_t id, uint32_t) { return simple(Cmd::notify, id); }

int FakeTransport::set_option(int fd, uint32_t id, int level, int name, const void* value,
                              size_t len) {
  {
    std::lock_guard lock(mutex_);
    auto* bytes = static_cast<const uint8_t*>(value);
    last_option = {level, name, std::vector<uint8_t>(bytes, bytes + len)};
  }
  return replied(Cmd::set_option, fd, id, 0, simple(Cmd::set_option, id));
}

int FakeTransport::migrate_id(int new_fd, uint32_t id, int old_fd, uint32_t* events_reported) {
  *events_reported = reported(id);
  if (int err = simple(Cmd::migrate_id, id)) return err;
  // The kernel moves the id's queued events with it: its own, its requests'
  // and its groups'.
  std::lock_guard lock(mutex_);
  if (!migrate_moves_events || new_fd == old_fd) return 0;
  auto& from = queues_[old_fd];
  bool had = !from.empty();
  std::vector<ucma_abi_event_resp> moving;
  std::erase_if(from, [&](const ucma_abi_event_resp& w) {
    if (owns(id, w)) moving.push_back(w);
    return owns(id, w);
  });
  uint64_t count;
  if (had && from.empty()) (void)!::read(old_fd, &count, sizeof(count));
  for (const ucma_abi_event_resp& w : moving) push(new_fd, w);
  return 0;
}

int FakeTransport::join_mcast(int fd, uint32_t id, uint64_t uid, const sockaddr*, socklen_t,
                              uint16_t, uint32_t* mc_handle) {
  *mc_handle = 1000 + id;
  {
    std::lock_guard lock(mutex_);
    last_join_uid = uid;
  }
  if (int err = simple(Cmd::join_mcast, id)) return err;
  {
    std::lock_guard lock(mutex_);
    groups_[*mc_handle] = uid;
  }
  return replied(Cmd::join_mcast, fd, id, uid, 0);
}

int FakeTransport::leave_mcast(int, uint32_t mc_handle, uint32_t* events_reported) {
  std::lock_guard lock(mutex_);
  if (int err = injected(Cmd::leave_mcast)) return err;
  auto it = groups_.find(mc_handle);
  if (it == groups_.end()) return -ENOENT;
  *events_reported = delivered_[it->second];
  delivered_.erase(it->second);
  groups_.erase(it);
  return 0;
}

}  // namespace rdmacm::testing
