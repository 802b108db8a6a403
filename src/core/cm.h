// The core operations behind the C API. Each takes the application's handles,
// validates them against the live tables, and returns 0 (or a value) on
// success or -errno on failure. Nothing here throws except std::bad_alloc.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>

namespace rdmacm::core {

// Event channels and events (core/channels.cpp)
int create_channel(rdma_event_channel** out);
int destroy_channel(rdma_event_channel* channel);
int get_event(rdma_event_channel* channel, rdma_cm_event** out);
int ack_event(rdma_cm_event* event);

// Identifiers and addressing (core/ids.cpp)
int create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
              int port_space);
int destroy_id(rdma_cm_id* id);
int bind_addr(rdma_cm_id* id, const sockaddr* addr);
int resolve_addr(rdma_cm_id* id, const sockaddr* src, const sockaddr* dst,
                 int timeout_ms);
// Port of the id's source or destination address, in network order; 0 when
// the id is unknown or has no such port.
uint16_t src_port(rdma_cm_id* id);
uint16_t dst_port(rdma_cm_id* id);

// Devices (core/devices.cpp)
int get_devices(ibv_context*** out, int* count);
int free_devices(ibv_context** list);

// Length of a sockaddr of a family we support; 0 for any other.
socklen_t addr_len(const sockaddr* addr);

}  // namespace rdmacm::core
