// What cm_table prints of the CM's answers, one fact a line, in a form that
// is the same from run to run on one device (no QP numbers, handles or
// ephemeral ports), so that a run on our library and one on rdma-core's can
// be compared line by line.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>

namespace iwt {

// The listener's port of the case running, printed as "listen" (the runs
// compared use different ports); any other non-zero port prints as "eph".
extern uint16_t case_port;

// A line: printf-style, indented under its case.
void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// "what = 0", or "what = -1 EINVAL" (errno by name).
void ret(const char* what, int r);

// Fills buf with private data of this seed (byte i = seed + 7 i).
void fill(uint8_t* buf, int len, uint8_t seed);

// An event: type, status, and its parameters (private data as its length
// and whether it is the pattern of `seed`, conn or ud parameters).
void event(const char* who, const rdma_cm_event* ev, uint8_t seed);
// An id: device and transport, port, port space, QP type, addresses, the
// GIDs and P_Key of route.addr.addr.ibaddr, path records.
void id(const char* who, const rdma_cm_id* id);
// A QP as the device reports it: state, access flags, read depths.
void qp(const char* who, ibv_qp* qp);
// rdma_init_qp_attr's answer for each QP state: return, mask and the
// attributes the mask names.
void init_attrs(const char* who, rdma_cm_id* id);

}  // namespace iwt
