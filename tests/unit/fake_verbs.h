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

// Makes the fake device an iWARP one (IBV_TRANSPORT_IWARP, an RNIC) or,
// with false, the InfiniBand one it starts as.
void fake_set_iwarp(bool iwarp);

// How often the library opened and closed the fake device's context.
int fake_device_opens();
int fake_device_closes();

// QPs, CQs, completion channels, MRs and address handles alive (none
// should outlive its id).
size_t fake_verbs_objects();

// The MTU the port reports as active from now on (IBV_MTU_4096 at start;
// ibv_query_port reports max_mtu IBV_MTU_4096 and LID 1 always).
void fake_set_active_mtu(ibv_mtu mtu);

// The states a live QP was moved to by ibv_modify_qp, in order (its
// creation in RESET not included).
std::vector<ibv_qp_state> qp_states(const ibv_qp* qp);

// The data path (fake_data_path.cpp): what a test plays as the network and
// the peer. Completion channels have a real fd (a semaphore eventfd) that
// polls readable while a CQ event waits for ibv_get_cq_event; a completion
// raises an event when its CQ was armed (ibv_req_notify_cq), as a device's.
// MRs get keys of their own; a QP moved to IBV_QPS_ERR completes everything
// posted with IBV_WC_WR_FLUSH_ERR (and what is posted later, at once).

// A work request the library posted: its bytes copied at the post (inline
// or through its lkey's MR; an SGE outside every MR with that lkey gives a
// IBV_WC_LOC_PROT_ERR completion instead, as a device's).
struct FakeSend {
  uint64_t wr_id;
  ibv_wr_opcode opcode;
  unsigned send_flags;
  uint32_t imm;  // host order
  uint64_t remote_addr;
  uint32_t rkey;
  std::vector<uint8_t> data;
};

// The QP created last (a test's way to the QP of an rsocket it made).
ibv_qp* fake_last_qp();
// Sends posted since the last call (the peer reads them as they land).
std::vector<FakeSend> fake_take_posted(ibv_qp* qp);
// Sends posted and not completed yet.
size_t fake_outstanding_sends(const ibv_qp* qp);
// Completes the oldest outstanding send with this status; false if none.
bool fake_complete_send(ibv_qp* qp, ibv_wc_status status);
// Every send completes as it is posted, successfully (a peer that keeps up).
void fake_auto_complete(ibv_qp* qp, bool on);
// Receives posted and not completed yet.
size_t fake_posted_recvs(const ibv_qp* qp);
// Completes the oldest posted receive with wc (its wr_id and qp_num are the
// receive's); false if none is posted (a device would have refused the
// message: RNR).
bool fake_receive(ibv_qp* qp, const ibv_wc& wc);
// The peer's RDMA write of len bytes at addr with rkey: done only if an MR
// with that rkey allows remote writes and holds [addr, addr+len), as a
// device checks it.
bool fake_remote_write(uint32_t rkey, uint64_t addr, const void* data, size_t len);
// CQs destroyed with CQ events not acknowledged (ibv_destroy_cq would wait
// for ever on a device), and ibv_ack_cq_events acknowledging more than was
// taken: both counted since the start.
size_t fake_cq_event_faults();

}  // namespace rdmacm::testing
