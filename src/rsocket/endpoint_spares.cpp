#include "rsocket/endpoint_spares.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <new>
#include <vector>

#include "common/mutex.h"
#include "core/cm.h"
#include "rsocket/config.h"
#include "rsocket/service_thread.h"

namespace rdmacm::rsocket {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kOften = std::chrono::seconds(1);  // endpoints this close form a run
constexpr int kRun = 3;  // from the third of a run on, the next is made ahead
constexpr auto kKeep = std::chrono::seconds(1);   // a spare nobody took by then goes

struct Spare {
  EndpointShape shape;
  core::DeviceHold hold;  // declared before ep: let go of after it
  Endpoint ep;
  pid_t pid;
  Clock::time_point made;
};

// A shape made lately: when, how many in a row each within kOften of the
// one before, and whether its next is wanted (hold taken, for the maker) or
// being made. (Not from the second on: a process holding both ends of one
// connection makes two at once.)
struct Recent {
  EndpointShape shape;
  Clock::time_point last;
  int run = 1;
  core::DeviceHold hold;
  bool making = false;
};

class Spares {
 public:
  bool take(const EndpointShape& shape, Endpoint* out) EXCLUDES(mutex_);
  void made(const EndpointShape& shape, rdma_cm_id* id) EXCLUDES(mutex_);
  // The service's: make each wanted spare; destroy those kept too long
  // (returns when to look again).
  void make_wanted() EXCLUDES(mutex_);
  Clock::time_point expire() EXCLUDES(mutex_);

 private:
  Recent* recent(const EndpointShape& shape) REQUIRES(mutex_);
  bool ready(const EndpointShape& shape, pid_t pid) REQUIRES(mutex_);
  Clock::time_point next_expiry() REQUIRES(mutex_);

  // Held for the lists only: verbs objects are made and destroyed without it.
  Mutex mutex_;
  std::vector<std::unique_ptr<Spare>> ready_ GUARDED_BY(mutex_);
  std::vector<Recent> recent_ GUARDED_BY(mutex_);
};

enum Kind { kMake, kExpire };

Spares& spares() {
  static auto* s = new Spares;  // never destroyed: its service outlives static destruction
  return *s;
}

ServiceThread<Spares>& service() {
  static auto* s = new ServiceThread<Spares>(nullptr, [](Spares* sp, int kind) {
    if (kind == kExpire) return sp->expire();
    sp->make_wanted();
    return Clock::time_point{};
  });
  return *s;
}

Recent* Spares::recent(const EndpointShape& shape) {
  auto it = std::find_if(recent_.begin(), recent_.end(),
                         [&](const Recent& r) { return r.shape == shape; });
  return it == recent_.end() ? nullptr : &*it;
}

bool Spares::ready(const EndpointShape& shape, pid_t pid) {
  return std::any_of(ready_.begin(), ready_.end(),
                     [&](const auto& s) { return s->pid == pid && s->shape == shape; });
}

Clock::time_point Spares::next_expiry() {
  Clock::time_point next{};
  for (const auto& s : ready_)
    if (next == Clock::time_point{} || s->made + kKeep < next) next = s->made + kKeep;
  return next;
}

bool Spares::take(const EndpointShape& shape, Endpoint* out) {
  std::unique_ptr<Spare> s;
  {
    LockGuard lock(mutex_);
    if (ready_.empty()) return false;
    pid_t me = getpid();
    auto it = std::find_if(ready_.begin(), ready_.end(),
                           [&](const auto& r) { return r->pid == me && r->shape == shape; });
    if (it == ready_.end()) return false;
    s = std::move(*it);
    ready_.erase(it);
  }
  *out = std::move(s->ep);
  return true;  // its hold goes with s: the taker's id is on the device now
}

void Spares::made(const EndpointShape& shape, rdma_cm_id* id) {
  if (!config().endpoints_ahead) return;
  auto now = Clock::now();
  {
    LockGuard lock(mutex_);
    Recent* r = recent(shape);
    if (!r) {
      // Forget the shape made longest ago, unless its next is on the way.
      auto oldest = recent_.end();
      for (auto it = recent_.begin(); it != recent_.end(); ++it)
        if (!it->making && (oldest == recent_.end() || it->last < oldest->last)) oldest = it;
      if (recent_.size() >= std::max<size_t>(config().endpoints_ahead, 1)) {
        if (oldest == recent_.end()) return;
        recent_.erase(oldest);
      }
      recent_.push_back({shape, now, 1, {}, false});
      return;
    }
    r->run = now - r->last < kOften ? r->run + 1 : 1;
    r->last = now;
    if (r->run < kRun || r->making || ready(shape, getpid())) return;
    r->making = true;
  }
  core::DeviceHold hold(id);  // outside our lock: it takes the core's
  LockGuard lock(mutex_);
  Recent* r = recent(shape);
  if (!r) return;  // (never: a making shape is not forgotten)
  // No device, or no thread to make it on: nothing is made (hold goes
  // after the lock).
  if (!hold || service().schedule(this, kMake, Clock::now())) {
    r->making = false;
    return;
  }
  r->hold = std::move(hold);
}

void Spares::make_wanted() {
  for (;;) {
    EndpointShape shape;
    core::DeviceHold hold;
    {
      LockGuard lock(mutex_);
      auto it = std::find_if(recent_.begin(), recent_.end(),
                             [](const Recent& r) { return r.making && r.hold; });
      if (it == recent_.end()) return;
      shape = it->shape;
      hold = std::move(it->hold);
    }
    std::unique_ptr<Spare> spare(new (std::nothrow) Spare{shape, {}, {}, getpid(), {}});
    int err = spare ? make_endpoint(shape, &spare->ep, true) : -ENOMEM;
    std::unique_ptr<Spare> dropped;  // destroyed after the lock
    LockGuard lock(mutex_);
    if (Recent* r = recent(shape)) r->making = false;
    if (err) continue;  // spare and hold go (the next endpoint is made as before)
    spare->hold = std::move(hold);
    spare->made = Clock::now();
    if (ready_.size() >= config().endpoints_ahead) {
      dropped = std::move(ready_.front());
      ready_.erase(ready_.begin());
    }
    ready_.push_back(std::move(spare));
    service().schedule(this, kExpire, next_expiry());
  }
}

Clock::time_point Spares::expire() {
  std::vector<std::unique_ptr<Spare>> old;  // destroyed after the lock
  LockGuard lock(mutex_);
  auto now = Clock::now();
  for (auto it = ready_.begin(); it != ready_.end();) {
    if (now - (*it)->made >= kKeep) {
      old.push_back(std::move(*it));
      it = ready_.erase(it);
    } else {
      ++it;
    }
  }
  return next_expiry();
}

}  // namespace

bool take_spare(const EndpointShape& shape, Endpoint* out) { return spares().take(shape, out); }

void endpoint_made(const EndpointShape& shape, rdma_cm_id* id) { spares().made(shape, id); }

}  // namespace rdmacm::rsocket
