// Events queued on an id's channel from user space (core/user_events.cpp):
// below the event pump, which hands them out.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <memory>

#include "core/objects.h"

namespace rdmacm::core {

// prepare creates the doorbell (so the failures that can be reported are
// reported early), ring sets the event and wakes the channel; cancel drops
// one or all of an id's queued events.
int prepare_user_event(const IdRef& id, std::shared_ptr<UserEvent>* out);
int ring_user_event(const std::shared_ptr<UserEvent>& ue, rdma_cm_event_type event,
                    int status, uint64_t arg);
void cancel_user_event(const std::shared_ptr<UserEvent>& ue);
void cancel_user_events(CmId& id);
// After rdma_migrate_id: queued events follow the id to its new channel, as
// the kernel moves the id's own.
void move_user_events(CmId& id);
// For a doorbell's uid (UserEvent::is_doorbell): fills ev with its queued
// event; false when that is not for the application (its id is being
// destroyed, or another reader took it).
bool translate_user_event(uint64_t uid, Event& ev);

}  // namespace rdmacm::core
