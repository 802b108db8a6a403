// libFuzzer target: the event pump (rdma_get_cm_event, rdma_ack_cm_event and
// the synchronous calls that read events themselves) fed arbitrary kernel
// events through the fake kernel of the unit tests.
//
// Each input sets up two non-blocking channels with a TCP id, a UDP id, a
// listener and a UDP id joined to a group, plus a synchronous id whose private
// channel only the library reads; the rest of the input is a program of steps
// that queue raw kernel events (any type, in range or not; any status; a uid
// that is one of ours, 0 or anything; any handle; private data of any length
// the wire carries; ud, conn and ECE fields), take, hold and acknowledge
// events, queue user events, migrate ids, and run synchronous calls over what
// was queued on the private channel. Then everything is acknowledged, drained
// and destroyed.
//
// A finding is a crash, a sanitizer report, a hang (libFuzzer's -timeout), or
// anything left behind: the library's tables keep what they hold reachable,
// so LSan alone would not see a lost id; every fd and every kernel id the
// library made must be gone after each input too.
//
// Everything about an event is free except what the kernel itself guarantees
// and the API relies on: destroying an id (leaving a group) waits until as
// many of its events are acknowledged as the kernel says it reported, as in
// rdma-core. So an event belonging to an object of ours comes on that
// object's channel with that object's uid, and group events (MULTICAST_JOIN,
// MULTICAST_ERROR) belong to groups, the others to ids (the kernel's
// ucma_create_uevent); a request's new id is known by handle with uid 0 only
// behind its request. Events of no object of ours (a random uid, or uid 0 with
// a handle of no request) may be anything and come on any channel. Breaking
// these would make a correct destroy wait for ever, in either library.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include "fake_transport.h"

namespace {


// Checks the library's answers: a failure is a finding like a crash.
[[noreturn]] void failed(const char* what, int line) {
  std::fprintf(stderr, "event_pump.cpp:%d: %s failed (errno %d)\n", line, what, errno);
  std::abort();
}
#define require(ok) ((ok) ? (void)0 : failed(#ok, __LINE__))

// EVENT_PUMP_TRACE=1 prints what an input does, to read a finding.
const bool tracing = std::getenv("EVENT_PUMP_TRACE") != nullptr;
#define trace(...) (tracing ? (void)std::fprintf(stderr, __VA_ARGS__) : (void)0)

void set_nonblocking(rdma_event_channel* ch) {
  require(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
}

sockaddr* sa(void* p) { return static_cast<sockaddr*>(p); }

// The context given with every join: the library hands it back in the
// group's events (as rdma-core does), in place of private data.
uint8_t join_context[1];

bool is_group_event(uint32_t type) {
  return type == RDMA_CM_EVENT_MULTICAST_JOIN || type == RDMA_CM_EVENT_MULTICAST_ERROR;
}

// Events whose param is the 1.4 user argument rather than connection data.
bool is_user_event(uint32_t type) {
  return type >= RDMA_CM_EVENT_ADDRINFO_RESOLVED && type <= RDMA_CM_EVENT_INTERNAL;
}

class World {
 public:
  explicit World(FuzzedDataProvider& in);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  void step();

 private:
  void queue();
  uint32_t queue_raw(int fd, const ucma_abi_event_resp& w);
  const char* name(const rdma_cm_id* id) const;
  void queue_for_id(ucma_abi_event_resp& w);
  void queue_for_group(ucma_abi_event_resp& w);
  void queue_stray(ucma_abi_event_resp& w);
  ucma_abi_event_resp event();
  uint32_t id_event_type();
  uint32_t pick_handle();
  rdma_event_channel* pick_channel() { return channels_[in_.ConsumeBool()]; }
  bool readable(const rdma_event_channel* ch) const {
    return ch == channels_[0] || ch == channels_[1] || ch == sync_->channel;
  }
  bool synchronous(const rdma_cm_id* id) const {
    return id->channel != channels_[0] && id->channel != channels_[1];
  }
  rdma_cm_id* pick_async_id();
  sockaddr_storage address();

  bool take(rdma_event_channel* ch);
  bool take_both() {
    bool first = take(channels_[0]);
    return take(channels_[1]) || first;
  }
  void ack_one();
  void ack_all();
  void drain();
  void inspect(const rdma_cm_event* ev);
  void read_private_data(const rdma_cm_event* ev, uint32_t type);
  void write_user_event();
  void migrate();
  void resolve();
  void toggle_group();
  void sync_call();

  FuzzedDataProvider& in_;
  rdmacm::testing::FakeTransport fake_;
  rdma_event_channel* channels_[2] = {};
  rdma_cm_id* tcp_ = nullptr;
  rdma_cm_id* udp_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  rdma_cm_id* mc_ = nullptr;
  rdma_cm_id* sync_ = nullptr;
  std::vector<rdma_cm_id*> requests_;  // ids made by connection requests: ours to destroy
  std::vector<rdma_cm_event*> held_;   // taken, not acknowledged yet
  struct Group {
    uint64_t uid;  // what the library gave the kernel's join
    rdma_cm_id* id;
  };
  std::vector<Group> groups_;  // joined
  sockaddr_in group_{};
  bool joined_ = false;
};

World::World(FuzzedDataProvider& in) : in_(in) {
  fake_.resolve_reports = true;  // resolve_addr answers, so doorbells ring
  for (auto& ch : channels_) {
    require((ch = rdma_create_event_channel()) != nullptr);
    set_nonblocking(ch);
  }
  require(!rdma_create_id(channels_[0], &tcp_, nullptr, RDMA_PS_TCP));
  require(!rdma_create_id(channels_[0], &udp_, nullptr, RDMA_PS_UDP));
  require(!rdma_create_id(channels_[1], &listener_, nullptr, RDMA_PS_TCP));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  require(!rdma_bind_addr(listener_, sa(&any)));
  require(!rdma_listen(listener_, 8));
  require(!rdma_create_id(channels_[1], &mc_, nullptr, RDMA_PS_UDP));
  group_.sin_family = AF_INET;
  group_.sin_addr.s_addr = htonl(0xEF000001);  // 239.0.0.1
  toggle_group();
  require(!rdma_create_id(nullptr, &sync_, nullptr, RDMA_PS_TCP));
  // A blocking read of an empty queue would wait for the fake's timeout.
  set_nonblocking(sync_->channel);
}

World::~World() {
  // Acknowledge and drain until quiet (draining may hand out new requests).
  do ack_all();
  while (take_both());
  for (rdma_cm_id* id : requests_) {
    trace("destroy %s %p\n", name(id), static_cast<void*>(id));
    require(!rdma_destroy_id(id));
  }
  for (rdma_cm_id* id : {tcp_, udp_, listener_, mc_, sync_}) {
    trace("destroy %s %p\n", name(id), static_cast<void*>(id));
    require(!rdma_destroy_id(id));
  }
  for (auto* ch : channels_) rdma_destroy_event_channel(ch);
  // Every kernel id the library made (its ids, its doorbells) is destroyed.
  // Requests the library could not place (a uid of no listener of ours: no
  // kernel sends that) stay the kernel's, known by handle only (uid 0).
  for (const auto& [handle, uid] : fake_.kernel_ids()) require(uid == 0);
}

void World::step() {
  switch (in_.ConsumeIntegralInRange(0, 11)) {
    case 0:
    case 1:
    case 2:
      queue();
      break;
    case 3:
      take(pick_channel());
      break;
    case 4:
      ack_one();
      break;
    case 5:
      drain();
      break;
    case 6:
      write_user_event();
      break;
    case 7:
      migrate();
      break;
    case 8:
      resolve();
      break;
    case 9:
      toggle_group();
      break;
    case 10:
      sync_call();
      break;
    case 11:
      // What query_addr answers from now on (ports and addresses read back).
      in_.ConsumeData(&fake_.addr.src_addr, sizeof(fake_.addr.src_addr));
      in_.ConsumeData(&fake_.addr.dst_addr, sizeof(fake_.addr.dst_addr));
      break;
  }
}

uint32_t World::queue_raw(int fd, const ucma_abi_event_resp& w) {
  uint32_t handle = fake_.queue_raw(fd, w);
  trace("queue fd %d: event %u status %d uid %#llx handle %u\n", fd, w.event, w.status,
        static_cast<unsigned long long>(w.uid), handle);
  return handle;
}

const char* World::name(const rdma_cm_id* id) const {
  static const char* const names[] = {"tcp", "udp", "listener", "mc", "sync"};
  const rdma_cm_id* ours[] = {tcp_, udp_, listener_, mc_, sync_};
  for (int i = 0; i < 5; ++i)
    if (id == ours[i]) return names[i];
  return std::find(requests_.begin(), requests_.end(), id) != requests_.end() ? "request"
                                                                              : "?";
}

void World::queue() {
  ucma_abi_event_resp w = event();
  switch (in_.ConsumeIntegralInRange(0, 2)) {
    case 0:
      queue_for_id(w);
      break;
    case 1:
      queue_for_group(w);
      break;
    default:
      queue_stray(w);
      break;
  }
}

// An event of one of our ids (connection requests' included), on its channel;
// a request may bring events of its new id behind it.
void World::queue_for_id(ucma_abi_event_resp& w) {
  std::vector<rdma_cm_id*> ids;
  for (rdma_cm_id* id : {tcp_, udp_, listener_, mc_, sync_})
    if (readable(id->channel)) ids.push_back(id);
  for (rdma_cm_id* id : requests_)
    if (readable(id->channel)) ids.push_back(id);
  rdma_cm_id* id = ids[in_.ConsumeIntegralInRange<size_t>(0, ids.size() - 1)];
  w.event = id_event_type();
  w.uid = reinterpret_cast<uintptr_t>(id);
  int fd = id->channel->fd;
  uint32_t handle = queue_raw(fd, w);
  // Behind a request on a channel the application reads (on a synchronous
  // id's, the library moves the new id to a channel of its own).
  if (w.event != RDMA_CM_EVENT_CONNECT_REQUEST || id == sync_) return;
  for (int n = in_.ConsumeIntegralInRange(0, 2); n > 0; --n) {
    ucma_abi_event_resp next = event();
    next.event = id_event_type();
    next.uid = 0;
    next.id = handle;
    queue_raw(fd, next);
  }
}

void World::queue_for_group(ucma_abi_event_resp& w) {
  std::vector<const Group*> live;
  for (const Group& g : groups_)
    if (readable(g.id->channel)) live.push_back(&g);
  if (live.empty()) return;
  const Group& g = *live[in_.ConsumeIntegralInRange<size_t>(0, live.size() - 1)];
  w.event = in_.ConsumeBool() ? RDMA_CM_EVENT_MULTICAST_JOIN : RDMA_CM_EVENT_MULTICAST_ERROR;
  w.uid = g.uid;
  queue_raw(g.id->channel->fd, w);
}

// An event of no object of ours, or of a kernel id the library made for itself
// (a doorbell), on any channel.
void World::queue_stray(ucma_abi_event_resp& w) {
  constexpr uint64_t kStray = 1ull << 62;
  std::vector<std::pair<uint32_t, uint64_t>> made;  // kernel ids with a uid
  for (const auto& kid : fake_.kernel_ids())
    if (kid.second) made.push_back(kid);
  const auto& pick = made[in_.ConsumeIntegralInRange<size_t>(0, made.size() - 1)];
  switch (in_.ConsumeIntegralInRange(0, 2)) {
    case 0:  // a uid of no object: past any address, and clear of the keys
             // the fake counts uid-0 events by (top bit and a handle)
      w.uid = in_.ConsumeIntegral<uint64_t>() >> 2 | kStray;
      break;
    case 1:  // uid 0: known by handle, as a request's new id would be
      w.uid = 0;
      w.id = pick.first;
      break;
    default:  // any of the kernel's, doorbells' included
      w.uid = pick.second;
      break;
  }
  bool is_ours = w.uid && w.uid < kStray;
  // A doorbell's event is a queued event of some async id: the application
  // reads it. Others may come anywhere.
  rdma_event_channel* ch = !is_ours && in_.ConsumeBool() ? sync_->channel : pick_channel();
  if (is_ours && is_group_event(w.event)) w.event += 2;
  queue_raw(ch->fd, w);
}

// Anything but the event types of groups.
uint32_t World::id_event_type() {
  uint32_t t = in_.ConsumeBool() ? in_.ConsumeIntegralInRange<uint32_t>(0, RDMA_CM_EVENT_INTERNAL + 1)
                                 : in_.ConsumeIntegral<uint32_t>();
  return is_group_event(t) ? t + 2 : t;
}

// A raw event: every field from the input (uid, and the type where it must
// match the object, are set by the caller).
ucma_abi_event_resp World::event() {
  ucma_abi_event_resp w{};
  w.event = in_.ConsumeBool() ? in_.ConsumeIntegralInRange<uint32_t>(0, RDMA_CM_EVENT_INTERNAL + 1)
                              : in_.ConsumeIntegral<uint32_t>();
  w.status = in_.ConsumeIntegral<int32_t>();
  w.id = pick_handle();
  // Any length the wire carries (up to 255: past every CM message's limit).
  auto data = [&](uint8_t* buf, uint8_t* len) {
    *len = in_.ConsumeIntegral<uint8_t>();
    std::vector<uint8_t> bytes = in_.ConsumeBytes<uint8_t>(*len);
    std::copy(bytes.begin(), bytes.end(), buf);
  };
  // The kernel's param union, read by the library as the id's QP type says.
  ucma_abi_conn_param conn{};
  data(conn.private_data, &conn.private_data_len);
  conn.qp_num = in_.ConsumeIntegral<uint32_t>();
  conn.srq = in_.ConsumeIntegral<uint8_t>();
  conn.responder_resources = in_.ConsumeIntegral<uint8_t>();
  conn.initiator_depth = in_.ConsumeIntegral<uint8_t>();
  conn.flow_control = in_.ConsumeIntegral<uint8_t>();
  conn.retry_count = in_.ConsumeIntegral<uint8_t>();
  conn.rnr_retry_count = in_.ConsumeIntegral<uint8_t>();
  conn.valid = in_.ConsumeIntegral<uint8_t>();
  ucma_abi_ud_param ud{};
  data(ud.private_data, &ud.private_data_len);
  ud.qp_num = in_.ConsumeIntegral<uint32_t>();
  ud.qkey = in_.ConsumeIntegral<uint32_t>();
  in_.ConsumeData(&ud.ah_attr, sizeof(ud.ah_attr));
  w.ece.vendor_id = in_.ConsumeIntegral<uint32_t>();
  w.ece.attr_mod = in_.ConsumeIntegral<uint32_t>();
  if (in_.ConsumeBool())
    w.param.ud = ud;
  else
    w.param.conn = conn;
  return w;
}

// A live kernel id's, or anything.
uint32_t World::pick_handle() {
  auto ids = fake_.kernel_ids();
  if (ids.empty() || in_.ConsumeBool()) return in_.ConsumeIntegral<uint32_t>();
  auto it = ids.begin();
  std::advance(it, in_.ConsumeIntegralInRange<size_t>(0, ids.size() - 1));
  return it->first;
}

rdma_cm_id* World::pick_async_id() {
  std::vector<rdma_cm_id*> ids = {tcp_, udp_, listener_, mc_};
  ids.insert(ids.end(), requests_.begin(), requests_.end());
  return ids[in_.ConsumeIntegralInRange<size_t>(0, ids.size() - 1)];
}

sockaddr_storage World::address() {
  sockaddr_storage s{};
  in_.ConsumeData(&s, sizeof(s));
  static const sa_family_t families[] = {AF_INET, AF_INET6, AF_IB};
  s.ss_family = in_.PickValueInArray(families);
  return s;
}

// Takes the channel's next event and holds it; false when there is none.
bool World::take(rdma_event_channel* ch) {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev)) {
    require(errno == EAGAIN && !ev);
    return false;
  }
  inspect(ev);
  held_.push_back(ev);
  uint32_t type;
  std::memcpy(&type, &ev->event, sizeof(type));
  trace("took from fd %d: event %u for %s %p\n", ch->fd, type, name(ev->id),
        static_cast<void*>(ev->id));
  return true;
}

void World::ack_one() {
  if (held_.empty()) return;
  auto it = held_.begin() + in_.ConsumeIntegralInRange<size_t>(0, held_.size() - 1);
  require(!rdma_ack_cm_event(*it));
  held_.erase(it);
}

void World::ack_all() {
  for (rdma_cm_event* ev : held_) require(!rdma_ack_cm_event(ev));
  held_.clear();
}

void World::drain() {
  while (take_both()) {
  }
  ack_all();
}

// Reads what the application may read of an event.
void World::inspect(const rdma_cm_event* ev) {
  require(ev->id != nullptr);
  // The kernel's type may be outside the enum: read it as the integer it is.
  uint32_t type;
  std::memcpy(&type, &ev->event, sizeof(type));
  require(rdma_event_str(static_cast<rdma_cm_event_type>(type)) != nullptr);
  (void)rdma_get_src_port(ev->id);
  (void)rdma_get_dst_port(ev->id);
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->listen_id &&
      std::find(requests_.begin(), requests_.end(), ev->id) == requests_.end()) {
    requests_.push_back(ev->id);
    // A synchronous listener's request gets a private channel of its own.
    if (ev->id->channel != channels_[0] && ev->id->channel != channels_[1])
      set_nonblocking(ev->id->channel);
  }
  read_private_data(ev, type);
}

void World::read_private_data(const rdma_cm_event* ev, uint32_t type) {
  if (is_group_event(type)) {
    require(ev->param.ud.private_data == join_context);
    return;
  }
  if (is_user_event(type)) return;
  const rdma_cm_id* owner = ev->listen_id ? ev->listen_id : ev->id;
  const void* data = owner->qp_type == IBV_QPT_UD ? ev->param.ud.private_data
                                                  : ev->param.conn.private_data;
  uint8_t len = owner->qp_type == IBV_QPT_UD ? ev->param.ud.private_data_len
                                             : ev->param.conn.private_data_len;
  require(!len || data);
  volatile uint8_t sink = 0;
  for (uint8_t i = 0; i < len; ++i) sink = sink + static_cast<const uint8_t*>(data)[i];
}

void World::write_user_event() {
  rdma_cm_id* id = in_.ConsumeBool() ? sync_ : pick_async_id();
  uint32_t type = in_.ConsumeBool() ? RDMA_CM_EVENT_USER : in_.ConsumeIntegral<uint32_t>();
  int ret = rdma_write_cm_event(id, static_cast<rdma_cm_event_type>(type),
                                in_.ConsumeIntegral<int>(), in_.ConsumeIntegral<uint64_t>());
  // Only USER is the application's, and a synchronous id has no channel to read.
  bool allowed = type == RDMA_CM_EVENT_USER && !synchronous(id);
  require(allowed ? ret == 0 : ret == -1 && errno == EINVAL);
}

void World::migrate() {
  // rdma_migrate_id waits until the id's events handed out are acknowledged.
  ack_all();
  rdma_cm_id* id = pick_async_id();
  rdma_event_channel* to = in_.ConsumeBool() ? nullptr : pick_channel();
  int ret = rdma_migrate_id(id, to);
  trace("migrate %s to fd %d: %d\n", name(id), to ? to->fd : -1, ret);
  if (!to && !ret) set_nonblocking(id->channel);  // now synchronous, privately
}

void World::resolve() {
  rdma_cm_id* id = pick_async_id();
  sockaddr_storage dst = address();
  (void)rdma_resolve_addr(id, nullptr, sa(&dst), 100);
}

void World::toggle_group() {
  if (joined_) {
    ack_all();  // leaving waits until the group's events are acknowledged
    require(!rdma_leave_multicast(mc_, sa(&group_)));
    std::erase_if(groups_, [&](const Group& g) { return g.id == mc_; });
  } else {
    // Once migrated to no channel, mc_ waits for the join's event, which no
    // one queues on its private channel: joined all the same, as in rdma-core.
    int ret = rdma_join_multicast(mc_, sa(&group_), join_context);
    require(!ret || (synchronous(mc_) && errno == EAGAIN));
    groups_.push_back({fake_.last_join_uid, mc_});
  }
  joined_ = !joined_;
}

// A call on the synchronous id, which completes by reading its private
// channel (events queued there, or the fake's answer to resolve_addr).
void World::sync_call() {
  trace("sync call\n");
  switch (in_.ConsumeIntegralInRange(0, 2)) {
    case 0: {
      sockaddr_storage dst = address();
      (void)rdma_resolve_addr(sync_, nullptr, sa(&dst), 100);
      break;
    }
    case 1: {
      sockaddr_storage group = address();
      uint64_t before = fake_.last_join_uid;
      (void)rdma_join_multicast(sync_, sa(&group), join_context);
      if (fake_.last_join_uid != before) groups_.push_back({fake_.last_join_uid, sync_});
      break;
    }
    case 2: {
      rdma_cm_id* id = nullptr;
      if (!rdma_get_request(sync_, &id)) inspect(id->event);
      break;
    }
  }
  // The event the call kept (the library acknowledges it on the next call).
  if (sync_->event) inspect(sync_->event);
}

// The fake's channels are eventfds: count those open (other fds come and go
// with libFuzzer itself, its symbolizer's pipes for one).
int open_eventfds() {
  int n = 0;
  char link[64];
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    ssize_t len = readlink(fd.path().c_str(), link, sizeof(link) - 1);
    if (len > 0 && std::string_view(link, len) == "anon_inode:[eventfd]") ++n;
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  {
    World world(in);
    while (in.remaining_bytes()) world.step();
  }
  require(open_eventfds() == 0);
  return 0;
}
