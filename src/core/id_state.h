// Floor: what every operation on an id uses. Finding the live id behind a
// public pointer, its addresses and ports, refreshing what the kernel knows
// of it, making an id for a kernel id (a connection request's), and the
// bookkeeping of its events. Calls only the ground below it (objects,
// registry, transport, device table).
#pragma once

#include <rdma/rdma_cma.h>

#include <memory>

#include "core/objects.h"

namespace rdmacm::core {

// The live id behind a public pointer, or nullptr.
IdRef find_id(rdma_cm_id* pub);

// Whether the id carries datagrams (its events' parameters are rdma_ud_param).
inline bool is_ud(const CmId& id) { return id.pub.qp_type == IBV_QPT_UD; }
// The QP type an id of this port space uses by default; -1 if unknown.
int default_qp_type(int port_space);
// Length of a sockaddr of a family we support; 0 for any other.
socklen_t addr_len(const sockaddr* addr);
// Port of an address, in network order; 0 for a family without ports.
uint16_t port_of(const sockaddr* addr);

// A new event channel, not listed: a synchronous id's own (or one that
// rdma_create_event_channel then lists for the application).
ChannelRef private_channel(int* err);

// Which calls read the id's GIDs (route.addr.addr.ibaddr) from the kernel,
// as rdma-core 44 does: a bind and a connection request's new id always (on
// iWARP too: the kernel gives the GIDs of the MAC address there), a resolved
// address on IB transports only, a listen never.
enum class Gids { always, on_ib, never };
// Re-reads the id's addresses, device and port, and its GIDs as `gids` says.
int refresh_address(CmId& id, Gids gids);
// Re-reads the path records of a resolved route into id.pub.route.
int refresh_paths(CmId& id);

// Gives a kernel id the kernel made for a connection request to `listener`
// an owner, registered like any other, on the listener's channel or, for a
// synchronous listener, on a private one. nullptr if that fails (out of
// memory, no channel); the kernel id is destroyed then.
IdRef adopt_id(const CmId& listener, uint32_t handle);

// Undoes adopt_id for an id nobody has seen yet (its setup failed).
void discard_id(const IdRef& id);

// The error a call reports for an event's failure status: ECONNREFUSED for a
// rejection, else the status as -errno. 0 for a success.
int status_error(const rdma_cm_event& ev);

// Counts an event the application hands back as acknowledged (its id's and
// group's tallies) and returns it to the pool; -EINVAL if it is not ours.
int release_event(rdma_cm_event* event);
// Acknowledges the event a synchronous call left on id.pub.event, if any.
void ack_stored_event(CmId& id);

// Says once on stderr that `call` on `handle` has waited a few seconds for
// the acknowledgement of the events of this id (or group), naming them.
void warn_unacked(const char* call, const void* handle, const CmId* id,
                  const Multicast* group = nullptr);

}  // namespace rdmacm::core
