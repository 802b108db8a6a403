#include "fake_transport.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace rdmacm::testing {

int FakeTransport::injected(const std::string& command) {
  auto it = failures_.find(command);
  if (it == failures_.end()) return 0;
  int err = it->second;
  failures_.erase(it);
  return -err;
}

void FakeTransport::fail_next(const std::string& command, int err) {
  std::lock_guard lock(mutex_);
  failures_[command] = err;
}

void FakeTransport::queue_event(int fd, uint64_t uid, uint32_t event, int32_t status) {
  std::lock_guard lock(mutex_);
  WireEvent w;
  w.uid = uid;
  w.event = event;
  w.status = status;
  for (auto& [id, u] : ids_)
    if (u == uid) w.id = id;
  push(fd, w);
}

uint32_t FakeTransport::queue_request(int fd, uint64_t listener_uid) {
  uint32_t handle;
  {
    std::lock_guard lock(mutex_);
    handle = next_id_++;
    ids_[handle] = 0;
  }
  queue_event(fd, listener_uid, 4 /* RDMA_CM_EVENT_CONNECT_REQUEST */, 0);
  std::lock_guard lock(mutex_);
  queues_[fd].back().id = handle;
  return handle;
}

uint32_t FakeTransport::queue_raw(int fd, WireEvent w) {
  std::lock_guard lock(mutex_);
  if (w.event == 4 /* RDMA_CM_EVENT_CONNECT_REQUEST */) {
    w.id = next_id_++;
    ids_[w.id] = 0;
  }
  push(fd, w);
  return w.id;
}

void FakeTransport::push(int fd, const WireEvent& w) {
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
  if (int err = injected("open_channel")) return err;
  int fd = ::eventfd(0, EFD_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int FakeTransport::create_id(int, uint64_t uid, uint16_t, uint8_t, uint32_t* id) {
  std::lock_guard lock(mutex_);
  if (int err = injected("create_id")) return err;
  *id = next_id_++;
  ids_[*id] = uid;
  return 0;
}

int FakeTransport::destroy_id(int, uint32_t id, uint32_t* events_reported) {
  if (on_destroy) std::exchange(on_destroy, nullptr)();
  std::lock_guard lock(mutex_);
  if (int err = injected("destroy_id")) return err;
  auto it = ids_.find(id);
  if (it == ids_.end()) return -EINVAL;
  *events_reported = delivered_[counted(it->second, id)];
  delivered_.erase(counted(it->second, id));
  ids_.erase(it);
  return 0;
}

int FakeTransport::bind(int, uint32_t id, const sockaddr* addr, socklen_t len) {
  std::lock_guard lock(mutex_);
  if (int err = injected("bind")) return err;
  if (!ids_.count(id)) return -EINVAL;
  std::memcpy(&addr_.src, addr, len);
  return 0;
}

int FakeTransport::resolve_addr(int fd, uint32_t id, const sockaddr*, socklen_t,
                                const sockaddr* dst, socklen_t dst_len, uint32_t) {
  std::lock_guard lock(mutex_);
  if (int err = injected("resolve_addr")) return err;
  if (!ids_.count(id)) return -EINVAL;
  std::memcpy(&addr_.dst, dst, dst_len);
  if (!resolve_reports) return 0;
  WireEvent w;
  w.uid = ids_[id];
  w.id = id;  // by handle: a request's id has no uid yet (uid 0)
  w.event = 0;  // RDMA_CM_EVENT_ADDR_RESOLVED
  push(fd, w);
  return 0;
}

int FakeTransport::query_addr(int, uint32_t id, WireAddr* out) {
  std::lock_guard lock(mutex_);
  if (int err = injected("query_addr")) return err;
  if (!ids_.count(id)) return -EINVAL;
  *out = addr;
  out->src = addr_.src;
  out->dst = addr_.dst;
  return 0;
}

int FakeTransport::query_gid(int, uint32_t, uint8_t sgid[16], uint8_t dgid[16]) {
  std::memset(sgid, 0, 16);
  std::memset(dgid, 0, 16);
  return 0;
}

int FakeTransport::get_event(int fd, WireEvent* out) {
  std::unique_lock lock(mutex_);
  if (int err = injected("get_event")) return err;
  auto& q = queues_[fd];
  if (q.empty()) {
    if (::fcntl(fd, F_GETFL) & O_NONBLOCK) return -EAGAIN;
    // Blocking, like the kernel; bounded so a broken test fails, not hangs.
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !q.empty(); }))
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

int FakeTransport::simple(const char* command, uint32_t id) {
  std::lock_guard lock(mutex_);
  if (int err = injected(command)) return err;
  return ids_.count(id) ? 0 : -EINVAL;
}

int FakeTransport::resolve_route(int, uint32_t id, uint32_t) {
  return simple("resolve_route", id);
}

int FakeTransport::query_path(int, uint32_t id, std::vector<ibv_path_data>* out) {
  out->clear();
  return simple("query_path", id);
}

int FakeTransport::connect(int, uint32_t id, const WireConnParam& param, const WireEce&) {
  last_conn = param;
  return simple("connect", id);
}

int FakeTransport::listen(int, uint32_t id, int) { return simple("listen", id); }

int FakeTransport::accept(int, uint32_t id, uint64_t, const WireConnParam& param,
                          const WireEce&) {
  last_conn = param;
  return simple("accept", id);
}

int FakeTransport::reject(int, uint32_t id, const void*, uint8_t, uint8_t) {
  return simple("reject", id);
}

int FakeTransport::disconnect(int, uint32_t id) { return simple("disconnect", id); }

int FakeTransport::init_qp_attr(int, uint32_t id, ibv_qp_state state, ibv_qp_attr* attr,
                                int* mask) {
  *attr = {};
  attr->qp_state = state;
  *mask = IBV_QP_STATE;
  return simple("init_qp_attr", id);
}

int FakeTransport::notify(int, uint32_t id, uint32_t) { return simple("notify", id); }

int FakeTransport::set_option(int, uint32_t id, int, int, const void*, size_t) {
  return simple("set_option", id);
}

int FakeTransport::migrate_id(int, uint32_t id, int, uint32_t* events_reported) {
  *events_reported = reported(id);
  return simple("migrate_id", id);
}

int FakeTransport::join_mcast(int, uint32_t id, uint64_t uid, const sockaddr*, socklen_t,
                              uint16_t, uint32_t* mc_handle) {
  *mc_handle = 1000 + id;
  last_join_uid = uid;
  if (int err = simple("join_mcast", id)) return err;
  std::lock_guard lock(mutex_);
  groups_[*mc_handle] = uid;
  return 0;
}

int FakeTransport::leave_mcast(int, uint32_t mc_handle, uint32_t* events_reported) {
  std::lock_guard lock(mutex_);
  if (int err = injected("leave_mcast")) return err;
  auto it = groups_.find(mc_handle);
  if (it == groups_.end()) return -ENOENT;
  *events_reported = delivered_[it->second];
  delivered_.erase(it->second);
  groups_.erase(it);
  return 0;
}

}  // namespace rdmacm::testing
