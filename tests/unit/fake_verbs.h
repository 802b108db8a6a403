// A stand-in RDMA device for the unit tests that need an id on a device
// (connect, accept, disconnect, resolve_route, QPs). Linked into a test
// binary, fake_verbs.cpp defines the libibverbs calls the library makes, so
// the binary sees one InfiniBand device and never reaches libibverbs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <rdma/rdma_cma.h>

#include "fake_transport.h"

namespace rdmacm::testing {

// The fake device's node GUID as the kernel reports it: set
// FakeTransport::addr.node_guid to it and ids bind to the device.
inline constexpr uint64_t kFakeDeviceGuid = 0x1122334455667788;

// Puts the fake kernel's ids on this device, has it answer at once what the
// network would: ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_RESPONSE,
// ESTABLISHED (to an accept), DISCONNECTED, MULTICAST_JOIN; and move a
// migrated id's queued events, as the kernel does.
void answer_at_once(FakeTransport& fake);

// rdma_create_qp with one WR and SGE each way (the id on the device).
int add_qp(rdma_cm_id* id, ibv_qp_type type = IBV_QPT_RC);

// How often the library opened and closed the fake device's context.
int fake_device_opens();
int fake_device_closes();

// QPs, CQs and completion channels alive (none should outlive its id).
size_t fake_verbs_objects();

// The states a live QP was moved to by ibv_modify_qp, in order (its
// creation in RESET not included).
std::vector<ibv_qp_state> qp_states(const ibv_qp* qp);

}  // namespace rdmacm::testing
