// The core operations behind the C API. Each takes the application's handles,
// validates them against the live tables, and returns 0 (or a value) on
// success or -errno on failure. Nothing here throws except std::bad_alloc.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <cstring>

namespace rdmacm::core {

struct Device;  // core/device_table.h

// Event channels and events (core/channels.cpp)
int create_channel(rdma_event_channel** out);
int destroy_channel(rdma_event_channel* channel);
int get_event(rdma_event_channel* channel, rdma_cm_event** out);
int ack_event(rdma_cm_event* event);
// rdma_event_str's answer: the enum's name, or "UNKNOWN EVENT" (core/objects.cpp).
const char* event_name(uint32_t type);

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

int resolve_route(rdma_cm_id* id, int timeout_ms);
int set_option(rdma_cm_id* id, int level, int name, const void* value, size_t len);
int migrate_id(rdma_cm_id* id, rdma_event_channel* channel);

// Connections (core/connections.cpp)
int connect(rdma_cm_id* id, const rdma_conn_param* param);
int listen(rdma_cm_id* id, int backlog);
int accept(rdma_cm_id* id, const rdma_conn_param* param);
// ece: reject as rdma_reject_ece does (vendor option not supported).
int reject(rdma_cm_id* id, const void* private_data, uint8_t len, bool ece);
int disconnect(rdma_cm_id* id);
int establish(rdma_cm_id* id);
int notify(rdma_cm_id* id, int event);
int init_qp_attr(rdma_cm_id* id, ibv_qp_attr* attr, int* mask);
int set_local_ece(rdma_cm_id* id, const ibv_ece* ece);
int get_remote_ece(rdma_cm_id* id, ibv_ece* ece);

// QPs and SRQs (core/qps.cpp)
int create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr);
int create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr);
int destroy_qp(rdma_cm_id* id);
int create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr);
int create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr);
int destroy_srq(rdma_cm_id* id);

// Multicast (core/multicast.cpp)
int join_multicast(rdma_cm_id* id, const sockaddr* addr, void* context);
int join_multicast_ex(rdma_cm_id* id, const rdma_cm_join_mc_attr_ex* attr, void* context);
int leave_multicast(rdma_cm_id* id, const sockaddr* addr);

// Endpoints (core/endpoints.cpp)
int create_ep(rdma_cm_id** id, const rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_attr);
int destroy_ep(rdma_cm_id* id);
int get_request(rdma_cm_id* listen, rdma_cm_id** id);

// What the rsocket wing needs beyond the public API (as rdma-core's rsockets
// use its internals): finish a synchronous id's pending operation (the one a
// non-blocking channel left with EAGAIN), as rdma_connect would have; move
// its QP to ERR, flushing its work requests (core/connections.cpp); the
// largest QP its device allows (core/devices.cpp).
int complete_pending(rdma_cm_id* id);
int flush_qp(rdma_cm_id* id);
uint32_t max_qp_wr(rdma_cm_id* id);
// A QP made ahead on the id's device (ibv_create_qp, still in RESET) becomes
// the id's, as rdma_create_qp's would: moved to INIT for the id's port. The
// CQs are the caller's to set on the id (core/qps.cpp).
int attach_qp(rdma_cm_id* id, ibv_qp* qp);
// Keeps the id's device open while the holder has verbs objects of its own
// on it (a removed device's context closes once no id and no hold is left
// on it, core/device_table.h). Empty if the id has no device or it was
// removed.
class DeviceHold {
 public:
  DeviceHold() = default;
  explicit DeviceHold(rdma_cm_id* id);
  DeviceHold(DeviceHold&& o) noexcept : device_(o.device_) { o.device_ = nullptr; }
  DeviceHold& operator=(DeviceHold&& o) noexcept;
  DeviceHold(const DeviceHold&) = delete;
  DeviceHold& operator=(const DeviceHold&) = delete;
  ~DeviceHold() { reset(); }
  explicit operator bool() const { return device_ != nullptr; }
  void reset();

 private:
  Device* device_ = nullptr;
};

// Events written by the application (core/user_events.cpp)
int write_event(rdma_cm_id* id, uint32_t event, int status, uint64_t arg);

// Asynchronous address info (core/addrinfo_async.cpp)
int resolve_addrinfo(rdma_cm_id* id, const char* node, const char* service,
                     const rdma_addrinfo* hints);
int query_addrinfo(rdma_cm_id* id, rdma_addrinfo** info);

// Devices (core/devices.cpp)
int get_devices(ibv_context*** out, int* count);
int free_devices(ibv_context** list);

// RDMACM_TRACE's line for what an rsocket did about its peer (core/trace.cpp):
// `fd` the socket's, `what` one phrase, `err` the errno it gave. Costs a load
// and a branch when tracing is off.
void trace_rsocket(int fd, const char* what, int err);

// Address info (core/addrinfo.cpp). On a resolver failure the result is 1,
// *gai_error holds getaddrinfo's code (EAI_*) and errno is as it left it.
int getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                rdma_addrinfo** res, int* gai_error);
int freeaddrinfo(rdma_addrinfo* res);

// An event type read or written as the integer it is. A kernel's (or an
// application's) type may lie past the C enum's values, which C allows but a
// C++ read through the enum type does not (undefined; UBSan: "load of value
// ... which is not a valid value for type 'rdma_cm_event_type'").
// The same holds for every enum an application hands in (a port space, an
// ibv_event_type, a QP state): read them with enum_value.
template <typename E>
inline uint32_t enum_value(const E& e) {
  static_assert(sizeof(E) == sizeof(uint32_t));
  uint32_t value;
  std::memcpy(&value, &e, sizeof(value));
  return value;
}
inline uint32_t event_type(const rdma_cm_event_type& type) { return enum_value(type); }
inline void set_event_type(rdma_cm_event_type& type, uint32_t value) {
  std::memcpy(&type, &value, sizeof(value));
}

}  // namespace rdmacm::core
