// Events queued on an id's channel from user space: the application's
// (rdma_write_cm_event) and the library's own (rdma_resolve_addrinfo).
//
// Kernels before the ucma WRITE_CM_EVENT command (Linux 6.1 among them) have
// no way to queue an event from user space, and an application may be asleep
// in poll() on the channel's fd, which only a kernel event wakes. So every
// queued event gets a doorbell: a kernel id of the library's own on the same
// channel, told to resolve the loopback address. The kernel queues the
// doorbell's ADDR_RESOLVED (or ADDR_ERROR) behind every event already
// waiting, so it marks the queued event's place; next_event() hands out the
// queued event in its stead and destroys the doorbell.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>

#include "core/user_events.h"

#include "core/cm.h"
#include "core/id_state.h"
#include "core/objects.h"
#include "core/transport.h"

namespace rdmacm::core {
namespace {

void forget(UserEvent& ue) {
  Objects::get().user_events.take(Objects::key(ue.uid()));
  uint32_t ignored;
  // The kernel drops the doorbell's event, if any, with it.
  transport().destroy_id(ue.channel->pub.fd, ue.doorbell, &ignored);
}

// Wakes the channel: the doorbell resolves the loopback address.
int knock(int fd, uint32_t doorbell) {
  sockaddr_in loopback{};
  loopback.sin_family = AF_INET;
  loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return transport().resolve_addr(fd, doorbell, nullptr, 0,
                                  reinterpret_cast<const sockaddr*>(&loopback),
                                  sizeof(loopback), 2000);
}

// Gives a queued event a doorbell on the id's (new) channel, rung if the old
// one was; on failure it stays where it was. Caller holds the id's user_mutex.
void move(CmId& id, UserEvent& ue) {
  uint32_t fresh = 0, ignored;
  if (transport().create_id(id.fd(), ue.uid(), RDMA_PS_UDP, IBV_QPT_UD, &fresh)) return;
  if (ue.rung && knock(id.fd(), fresh)) {
    transport().destroy_id(id.fd(), fresh, &ignored);
    return;
  }
  // The kernel drops the old doorbell's event with it.
  transport().destroy_id(ue.channel->pub.fd, ue.doorbell, &ignored);
  ue.channel = id.own_channel();  // rdma_migrate_id's thread: it just set it
  ue.doorbell = fresh;
}

void unlink(CmId& id, const UserEvent& ue) {
  CmIdExtras* x = id.peek_extras();  // made by prepare_user_event
  if (!x) return;
  LockGuard lock(x->user_mutex);
  std::erase_if(x->pending_events, [&](const auto& p) { return p.get() == &ue; });
}

}  // namespace

int prepare_user_event(const IdRef& id, std::shared_ptr<UserEvent>* out) {
  CmIdExtras& x = id->extras();  // throws std::bad_alloc before the kernel is asked
  auto ue = std::make_shared<UserEvent>();
  ue->id = id;
  ue->channel = id->channel_ref();
  if (int err = transport().create_id(ue->channel->pub.fd, ue->uid(), RDMA_PS_UDP,
                                      IBV_QPT_UD, &ue->doorbell))
    return err;
  Objects::get().user_events.add(Objects::key(ue->uid()), ue);
  LockGuard lock(x.user_mutex);
  x.pending_events.push_back(ue);
  *out = std::move(ue);
  return 0;
}

int ring_user_event(const std::shared_ptr<UserEvent>& ue, rdma_cm_event_type event,
                    int status, uint64_t arg) {
  CmIdExtras* x = ue->id->peek_extras();  // made by prepare_user_event
  if (!x) return -ECANCELED;
  UniqueLock lock(x->user_mutex);
  // Cancelled meanwhile (its id destroyed): the doorbell's kernel handle is
  // gone and may already name another id, so leave the kernel alone.
  if (std::find(x->pending_events.begin(), x->pending_events.end(), ue) ==
      x->pending_events.end())
    return -ECANCELED;
  ue->event = event;
  ue->status = status;
  ue->arg = arg;
  int err = knock(ue->channel->pub.fd, ue->doorbell);
  ue->rung = !err;
  if (!err) return 0;
  lock.unlock();
  cancel_user_event(ue);
  return err;
}

void cancel_user_event(const std::shared_ptr<UserEvent>& ue) {
  unlink(*ue->id, *ue);
  forget(*ue);
}

void cancel_user_events(CmId& id) {
  CmIdExtras* x = id.peek_extras();
  if (!x) return;  // never queued anything
  std::vector<std::shared_ptr<UserEvent>> pending;
  {
    LockGuard lock(x->user_mutex);
    pending.swap(x->pending_events);
  }
  for (auto& ue : pending) forget(*ue);
}

void move_user_events(CmId& id) {
  CmIdExtras* x = id.peek_extras();
  if (!x) return;  // never queued anything
  LockGuard lock(x->user_mutex);
  for (auto& ue : x->pending_events) move(id, *ue);
}

bool translate_user_event(uint64_t uid, Event& ev) {
  // Taken, not just found: after rdma_migrate_id the event may have two
  // doorbells for a moment (the old one's event already read on the old
  // channel, the new one rung on the new), and two readers must not both
  // hand it out. The second finds nothing and drops its doorbell's event.
  auto ue = Objects::get().user_events.take(Objects::key(uid));
  if (!ue) return false;
  unlink(*ue->id, *ue);  // after ring_user_event: its fields are set
  forget(*ue);
  CmId& id = *ue->id;
  ++id.user_reported;
  if (id.destroying) {
    id.tally.done();
    return false;
  }
  ev.owner = ue->id;
  ev.pub.id = &id.pub;
  ev.pub.event = ue->event;
  ev.pub.status = ue->status;
  ev.pub.param.arg = ue->arg;
  return true;
}

int write_event(rdma_cm_id* pub, uint32_t event, int status, uint64_t arg) {
  auto id = find_id(pub);
  // Only RDMA_CM_EVENT_USER is the application's to write (INTERNAL is the
  // library's); a synchronous id has no channel the application reads.
  if (!id || event != RDMA_CM_EVENT_USER || id->sync) return -EINVAL;
  std::shared_ptr<UserEvent> ue;
  if (int err = prepare_user_event(id, &ue)) return err;
  return ring_user_event(ue, RDMA_CM_EVENT_USER, status, arg);
}

}  // namespace rdmacm::core
