// Where the event pump's Events live: a SlotArray (core/slot_array.h), never
// given back to the system (type-stable memory). rdma_ack_cm_event validates
// the pointer it is given by where it points, without a table: inside the
// array, at an Event's start, and live (a state claimed once, atomically).
// An event in a steady stream costs no malloc, no free, no reference count
// and no table lock. A second acknowledgement, a pointer into an event and a
// foreign pointer get EINVAL; an old pointer whose slot holds a newer event
// names that event, as a reused address does with malloc. The price: memory
// for the most events ever unacknowledged at once stays allocated (about 400
// bytes each).
#pragma once

#include <functional>
#include <utility>

#include "core/objects.h"

namespace rdmacm::core {

// An Event to fill: public part zeroed, no owner, not yet acknowledgeable.
// Throws std::bad_alloc.
Event* new_event();
// From now on the application may acknowledge it (claim_event finds it).
void hand_out(Event& ev);
// Empties an event being filled, for the next kernel event.
void clear_event(Event& ev);
// Gives an event (handed out and claimed, or never handed out) back to the
// pool, letting go of its id and group.
void recycle_event(Event& ev);
// The Event behind a pointer from rdma_get_cm_event, claimed for its
// acknowledgement; nullptr if the pointer is not an event handed out and not
// yet claimed.
Event* claim_event(const rdma_cm_event* pub);
// Calls f for every event handed out and not yet claimed, under the pool's
// lock (f must take no lock: see objects.h).
void for_each_handed_out(const std::function<void(const Event&)>& f);

// Gives an event back to the pool when it goes out of scope, unless released.
class EventHold {
 public:
  explicit EventHold(Event* ev) : ev_(ev) {}
  ~EventHold() {
    if (ev_) recycle_event(*ev_);
  }
  EventHold(const EventHold&) = delete;
  EventHold& operator=(const EventHold&) = delete;
  Event& operator*() const { return *ev_; }
  Event* operator->() const { return ev_; }
  Event* release() { return std::exchange(ev_, nullptr); }

 private:
  Event* ev_;
};

}  // namespace rdmacm::core
