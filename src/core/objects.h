// The C++ owners of the public handles, and the process-wide tables of them.
//
// Locking discipline (read before adding a lock, or a call under one):
// - Every lock is a leaf: no code takes a second lock while holding one.
//   The locks: each Registry's table lock, each StablePool's free list (ids,
//   channels), the event pool's, the EventTallies' shared one, each
//   PointerSet's, CmId::channel_lock, CmIdExtras::mc_mutex and ::user_mutex
//   (an id's, made with its extras), DeviceTable's. A Registry::for_each or
//   for_each_handed_out callback runs under its lock and must take no other
//   (warn_unacked only reads); StablePool::for_each holds none. A reference
//   (IdRef, ChannelRef) whose release may destroy its object is let go of
//   after the lock, since the destroy takes the pool's.
// - Each lock's rule is also written where it is declared, as annotations
//   clang's -Wthread-safety checks (common/thread_annotations.h): GUARDED_BY
//   on what it guards, REQUIRES on what runs under it. Fields of one object
//   guarded by another's lock (a group's `leaving`, a queued event's fields,
//   a Device's, a slot's or event's next_free) are beyond the annotations:
//   their comments say which lock.
// - Held across a call into the kernel, deliberately and only these:
//   user_mutex across the commands that ring or move a queued event's
//   doorbell (create/resolve/destroy of the library's own doorbell id, none
//   of which waits on the network or the application); mc_mutex across
//   ibv_detach_mcast (detach_groups); DeviceTable's lock across opening a
//   device. Never across GET_EVENT or EventTally::wait: both may wait on the
//   application.
// - Lock-free: finding an id or a channel from its public pointer
//   (StablePool::find: a range check and a compare-and-swap on the slot's
//   count); an id's extras pointer, installed once by compare-and-swap
//   (CmId::extras) and never replaced until ~CmId; code that only undoes or
//   reads (teardown, leave, query, the connection calls) peeks at it and
//   makes nothing when it is absent.
// - Deliberately unlocked, as in rdma-core: the public rdma_cm_id fields and
//   the connection state beside them (device, initiator_depth,
//   responder_resources, connect_error, the path records, local/remote ECE,
//   and the extras' connect_data and ep_qp_attr). The application owns an
//   id and must not race calls on it, except a destroy against a reader of
//   its channel, which shared ownership and the tallies make safe. What such
//   a reader does read while another thread changes it is atomic or locked:
//   channel (channel_lock: channel_ref, swap_channel), channel_fd, sync,
//   listening, destroying, user_reported.
// - Ownership loops, broken by hand when an id is destroyed:
//   CmIdExtras::groups <-> Multicast::id (forget_groups) and
//   CmIdExtras::pending_events <-> UserEvent::id (cancel_user_events). Both
//   own both ways on purpose: a group's event or a queued event must keep its
//   id alive while a reader holds it.
#pragma once

#include <rdma/rdma_cma.h>

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "core/leaf_lock.h"
#include "core/registry.h"
#include "core/stable_pool.h"
#include "core/transport.h"

namespace rdmacm::core {

struct Device;
struct CmId;
struct UserEvent;

class EventChannel;

// Shared ownership of an id or a channel (both live in StablePools: see
// stable_pool.h).
using IdRef = PoolRef<CmId>;
using ChannelRef = PoolRef<EventChannel>;

// Counts events the application has acknowledged, so that whoever tears
// down their source can wait until it has acknowledged as many as the kernel
// reported (rdma-core's documented rule for destroy and leave).
// An atomic count (4 bytes per id, one atomic add per acknowledgement);
// the rare waiters share one process-wide mutex and condition variable.
class EventTally {
 public:
  void done();
  // Waits until `reported` events are counted. If that takes more than a few
  // seconds, calls on_stall once (to say who waits for what) and goes on
  // waiting: rdma-core blocks silently for ever here.
  void wait(uint32_t reported, const std::function<void()>& on_stall = {});

 private:
  std::atomic<uint32_t> done_{0};
};

// A multicast group joined through an id (its kernel handle and address).
struct Multicast {
  IdRef id;
  void* context = nullptr;
  uint32_t handle = 0;
  uint16_t join_flags = 0;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  ibv_gid mgid{};
  uint16_t mlid = 0;
  EventTally tally;  // events of this group
  bool leaving = false;  // rdma_leave_multicast under way (id's mc_mutex)

  uint64_t uid() const { return reinterpret_cast<uintptr_t>(this); }
};

// An rdma_event_channel: one kernel fd on which the events of its ids arrive.
// Lives in a StablePool slot (Objects::channels()); the fd closes with it,
// when the last id using it lets go.
class EventChannel {
 public:
  EventChannel() { pub.fd = -1; }
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  rdma_event_channel pub{};
};

// What few ids use: multicast groups, queued events, an addrinfo
// resolution, an endpoint's connection data and QP attributes. One block per
// id, made on first use (CmId::extras()), so that an id without them costs a
// pointer.
struct CmIdExtras {
  // The id's groups: a leaf, held across ibv_detach_mcast (detach_groups).
  // Also guards each group's `leaving`.
  LeafLock mc_mutex;
  std::vector<std::shared_ptr<Multicast>> groups GUARDED_BY(mc_mutex);

  // Events queued by the library or the application (core/user_events.cpp),
  // and what rdma_resolve_addrinfo found (core/addrinfo_async.cpp). A leaf,
  // held across ringing and moving a queued event's doorbell (the kernel
  // commands listed above). Also guards each queued event's doorbell, channel and what it
  // reports until the event is unlinked (translate_user_event reads them
  // after).
  LeafLock user_mutex;
  bool resolving GUARDED_BY(user_mutex) = false;
  std::vector<std::shared_ptr<UserEvent>> pending_events GUARDED_BY(user_mutex);
  rdma_addrinfo* resolved GUARDED_BY(user_mutex) = nullptr;

  std::vector<uint8_t> connect_data;   // prefix of the next connect/accept data
  std::unique_ptr<ibv_qp_init_attr> ep_qp_attr;  // passive endpoints' QPs
};

// An rdma_cm_id and what the library tracks about it.
//
// Lives in a StablePool slot (Objects::ids()); its public pointer, pub, is
// how the application and the kernel (uid) name it. Kept small: there may
// be tens of thousands. What most ids never use lives in
// CmIdExtras; the path records hang off pub.route.path_rec itself, as in
// rdma-core.
struct CmId {
  CmId() = default;
  CmId(const CmId&) = delete;
  CmId& operator=(const CmId&) = delete;
  ~CmId() {
    delete extras_.load(std::memory_order_acquire);
    delete[] pub.route.path_rec;
  }

  rdma_cm_id pub{};  // pub.route.path_rec: new[]'d by refresh_paths, ours
  // Keeps the fd open while we live. Written while the id is unpublished
  // (set_channel), then only by rdma_migrate_id (swap_channel), under
  // channel_lock. The id's own calls read it through own_channel(); another
  // thread's (a listener's event reader) through channel_ref().
  ChannelRef channel GUARDED_BY(channel_lock);
  Device* device = nullptr;               // set once bound to a device
  uint32_t handle = 0;                    // the kernel's id
  std::atomic<int> channel_fd{-1};  // channel->pub.fd, for readers of fd()
  EventTally tally;  // all events of this id, groups' included
  std::atomic<uint32_t> user_reported{0};  // queued events handed out, like the kernel's

  // Connection state, as negotiated so far.
  ucma_abi_ece local_ece{};
  ucma_abi_ece remote_ece{};
  uint8_t initiator_depth = 0;
  uint8_t responder_resources = 0;
  bool connect_error = false;  // a failed response: drop the trailing events

  std::atomic<bool> sync{false};          // events consumed by the library
  std::atomic<bool> listening{false};     // rdma_listen succeeded
  // rdma_accept: 1 once the kernel took it (a synchronous id may still wait
  // for its establishment), 2 once it returned 0.
  std::atomic<uint8_t> accept_state{0};
  std::atomic<bool> destroying{false};
  // `channel`, against rdma_migrate_id: a leaf, held to copy or swap it.
  mutable LeafLock channel_lock;

  // The rarely used state, made on first use: two threads racing to make it
  // install one (the loser frees its copy). Throws std::bad_alloc.
  CmIdExtras& extras();
  // The same without making it: nullptr if nobody has used it yet (so there
  // is nothing to undo, cancel or read).
  CmIdExtras* peek_extras() const { return extras_.load(std::memory_order_acquire); }

  uint64_t uid() const { return reinterpret_cast<uintptr_t>(&pub); }
  // Atomic: rdma_migrate_id replaces channel while a reader of the old
  // channel may be querying the kernel through it (an ADDR_RESOLVED, say).
  // A plain int: std::atomic_load of a shared_ptr takes one of libstdc++'s
  // hashed global mutexes, a quarter of a connection's instructions.
  int fd() const { return channel_fd.load(std::memory_order_acquire); }
  // Sets channel and channel_fd together (single-threaded: a new id).
  void set_channel(ChannelRef ch) NO_THREAD_SAFETY_ANALYSIS {  // unpublished: ours alone
    channel_fd.store(ch->pub.fd, std::memory_order_release);
    pub.channel = &ch->pub;
    channel = std::move(ch);
  }
  // The channel, for a thread that may race rdma_migrate_id on this id.
  ChannelRef channel_ref() const EXCLUDES(channel_lock) {
    LockGuard lock(channel_lock);
    return channel;
  }
  // The channel, for the id's own calls: the application does not race
  // rdma_migrate_id against another call on the same id (rdma-core's rule),
  // so no lock.
  const ChannelRef& own_channel() const NO_THREAD_SAFETY_ANALYSIS {  // see above
    return channel;
  }
  // rdma_migrate_id's: installs ch and returns the old channel (for the
  // caller to let go of after the lock).
  ChannelRef swap_channel(ChannelRef ch) EXCLUDES(channel_lock) {
    LockGuard lock(channel_lock);
    channel_fd.store(ch->pub.fd, std::memory_order_release);
    pub.channel = &ch->pub;
    std::swap(channel, ch);
    return ch;
  }
  // Events handed to the application so far: the kernel's count plus ours.
  uint32_t reported(uint32_t by_kernel) const { return by_kernel + user_reported; }

 private:
  std::atomic<CmIdExtras*> extras_{nullptr};
};

// An event queued on an id's channel from user space. Its doorbell is a
// kernel id of the library's own on the same channel (see user_events.cpp).
// Filled before it is queued on its id (pending_events); from then on its
// channel, doorbell, rung and what it reports change only under the id's
// user_mutex, until it is unlinked again.
struct UserEvent {
  IdRef id;
  ChannelRef channel;  // where the doorbell lives
  uint32_t doorbell = 0;                  // its kernel handle
  bool rung = false;                      // the doorbell was told to ring
  rdma_cm_event_type event = RDMA_CM_EVENT_USER;
  int status = 0;
  uint64_t arg = 0;

  // The doorbell's uid: its address with the low bit set, so that the event
  // pump tells a doorbell's event from an id's (uid: an aligned address)
  // without a lookup.
  uint64_t uid() const { return reinterpret_cast<uintptr_t>(this) | 1; }
  static bool is_doorbell(uint64_t uid) { return uid & 1; }
};

// An rdma_cm_event handed to the application; owns its private data copy.
// Lives in core/event_pool.cpp's slot array, reused, never freed.
struct Event {
  // User-provided, so that a slot is not zeroed first (only what the kernel
  // sent is ever read from private_data).
  Event() {}

  rdma_cm_event pub{};
  // The id the kernel counted this event against, whose destroy waits for
  // its acknowledgement. For a connection request that is the listener, not
  // the new id in pub.id.
  IdRef owner;
  std::shared_ptr<Multicast> group;  // for multicast events: its tally too
  // kFree in the pool, kFilling while the pump fills it or an acknowledgement
  // returns it, kHandedOut while the application holds it.
  enum : uint8_t { kFree, kFilling, kHandedOut };
  std::atomic<uint8_t> state{kFree};
  Event* next_free = nullptr;  // the pool's list (its lock)
  uint8_t private_data[256];
};

// Process-wide tables. Never destroyed, so that handles an application leaks
// at exit are still safe to use from its atexit handlers.
struct Objects {
  // Ids made for connection requests, by kernel handle: their events before
  // rdma_accept come without a uid.
  Registry<void, CmId, IdRef> handles;
  Registry<void, Multicast> groups;  // by uid
  Registry<void, UserEvent> user_events;  // by doorbell uid

  static Objects& get();  // below

  // Every id the kernel knows about: made here, listed by publish() until
  // detach(). The application's calls find only those not being destroyed.
  static StablePool<CmId>& ids() { return StablePool<CmId>::get(); }
  // The listed id whose public pointer (which is also its uid) is pub, being
  // destroyed or not; empty if there is none.
  static IdRef listed_id(const void* pub) {
    return ids().find(pub, [](const CmId& id) { return static_cast<const void*>(&id.pub); });
  }
  // The application's event channels: listed from rdma_create_event_channel
  // to rdma_destroy_event_channel (a synchronous id's private one never is).
  static StablePool<EventChannel>& channels() { return StablePool<EventChannel>::get(); }
  static ChannelRef listed_channel(const rdma_event_channel* pub) {
    return channels().find(pub, [](const EventChannel& c) { return static_cast<const void*>(&c.pub); });
  }

  static const void* key(uint64_t uid) { return reinterpret_cast<const void*>(uid); }
  // Kernel handles start at 0; keep them clear of the null key.
  static const void* handle_key(uint32_t h) { return key((1ull << 32) | h); }
  // Makes a new id reachable by the application and by kernel events (also
  // by its kernel handle if it came with a connection request).
  void publish(const IdRef& id, bool by_handle = false);
  // Removes it from the event tables: only once every event the kernel
  // reported for it has been acknowledged or dropped, since a reader may hold
  // one it took from the kernel just before the destroy and must still find
  // its id to count it.
  void detach(const CmId& id);
};

// Constant-initialised storage that is never destroyed (see Objects).
union ObjectsStorage {
  constexpr ObjectsStorage() : objects() {}
  ~ObjectsStorage() {}
  Objects objects;
};
extern ObjectsStorage objects_storage;

inline Objects& Objects::get() { return objects_storage.objects; }

}  // namespace rdmacm::core
