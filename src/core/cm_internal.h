// Helpers shared between the core's translation units.
#pragma once

#include <rdma/rdma_cma.h>

#include <memory>

#include "core/objects.h"

namespace rdmacm::core {

// The live id behind a public pointer, or nullptr.
std::shared_ptr<CmId> find_id(rdma_cm_id* pub);

// Reads the next event of this channel and hands it out (blocking unless the
// fd is non-blocking).
int next_event(EventChannel& channel, rdma_cm_event** out);

// In synchronous mode, waits for the id's next event and turns a failure
// status into the call's error, as rdma-core does; 0 otherwise.
int complete(CmId& id);

// Re-reads the id's addresses, device, port and (on IB transports) GIDs.
int refresh_address(CmId& id);
// Re-reads the path records of a resolved route into id.pub.route.
int refresh_paths(CmId& id);

// QP state transitions driven by the kernel's INIT_QP_ATTR answers.
int modify_qp_rtr(CmId& id, uint8_t responder_resources);
int modify_qp_rts(CmId& id, uint8_t initiator_depth);
int modify_qp_err(CmId& id);
// Active side, after the peer's response: QP to RTS and RTU to the peer.
int finish_connect(CmId& id);

// rdma_create_id with a QP type other than the port space's default (as an
// rdma_addrinfo may ask for).
int create_id_typed(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                    int port_space, int qp_type);

// Creates an id with an existing kernel handle (a connection request's) on
// this channel, registered like any other.
std::shared_ptr<CmId> adopt_id(const CmId& listener, uint32_t handle);
// Moves the id to a new channel (nullptr: a private synchronous one).
int migrate(CmId& id, const std::shared_ptr<EventChannel>& to);

// Says once on stderr that `call` on `handle` has waited a few seconds for
// the acknowledgement of the events of this id (or group), naming them.
void warn_unacked(const char* call, const void* handle, const CmId* id,
                  const Multicast* group = nullptr);

// Queued events (core/user_events.cpp). prepare creates the doorbell (so the
// failures that can be reported are reported early), ring sets the event and
// wakes the channel; cancel drops one or all of an id's queued events.
int prepare_user_event(const std::shared_ptr<CmId>& id, std::shared_ptr<UserEvent>* out);
int ring_user_event(const std::shared_ptr<UserEvent>& ue, rdma_cm_event_type event,
                    int status, uint64_t arg);
void cancel_user_event(const std::shared_ptr<UserEvent>& ue);
void cancel_user_events(CmId& id);
// After rdma_migrate_id: queued events follow the id to its new channel, as
// the kernel moves the id's own.
void move_user_events(CmId& id);
// If uid is a doorbell's (*handled), fills ev with its queued event; false
// when that is not for the application (its id is being destroyed).
bool translate_user_event(uint64_t uid, Event& ev, bool* handled);
// Drops what rdma_resolve_addrinfo left on a dying id.
void forget_resolution(CmId& id);

// rdma_getaddrinfo hints: every address length has an address, and no
// length exceeds a sockaddr_storage.
bool hint_addrs_valid(const rdma_addrinfo& hints);

// Multicast bookkeeping: drop one group / all groups of an id from the
// tables (the kernel leaves them when the id is destroyed).
void forget_group(CmId& id, const Multicast& group);
void forget_groups(CmId& id);
// Detaches the id's QP from the groups it joined (before the QP goes: the
// kernel refuses to destroy a QP still attached to a group, EBUSY).
void detach_groups(CmId& id);

}  // namespace rdmacm::core
