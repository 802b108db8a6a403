// The kernel boundary as the core sees it: one call per ucma command.
//
// The kernel implementation lives in providers/ucma; unit tests put a scripted
// fake behind the same interface. Every call returns 0 (or a non-negative
// value where stated) on success and -errno on failure; none throws.
#pragma once

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>
#include <vector>

namespace rdmacm {

// Connection parameters as they cross the kernel boundary.
struct WireConnParam {
  uint32_t qp_num = 0;
  uint32_t qkey = 0;
  uint8_t private_data[256] = {};
  uint8_t private_data_len = 0;
  uint8_t srq = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t flow_control = 0;
  uint8_t retry_count = 0;
  uint8_t rnr_retry_count = 0;
  uint8_t valid = 0;
};

// Enhanced connection establishment data (vendor id and attribute modifier).
struct WireEce {
  uint32_t vendor_id = 0;
  uint32_t attr_mod = 0;
};

// Datagram parameters of UD events (connect request/established, multicast).
struct WireUdParam {
  uint32_t qp_num = 0;
  uint32_t qkey = 0;
  ibv_ah_attr ah_attr{};
  uint8_t private_data[256] = {};
  uint8_t private_data_len = 0;
};

// Address state of a kernel id (RDMA_USER_CM_QUERY_ADDR).
struct WireAddr {
  uint64_t node_guid = 0;  // 0 while the id is not bound to a device
  uint8_t port_num = 0;
  uint16_t pkey = 0;       // as the kernel reports it (network order)
  uint32_t ibdev_index = UINT32_MAX;
  sockaddr_storage src{};
  sockaddr_storage dst{};
};

// One event read from the kernel (RDMA_USER_CM_CMD_GET_EVENT).
struct WireEvent {
  uint64_t uid = 0;   // the uid the id was created with
  uint32_t id = 0;    // kernel handle; for CONNECT_REQUEST the new id's
  uint32_t event = 0;
  int32_t status = 0;
  WireConnParam conn;  // the kernel's param union read as connected...
  WireUdParam ud;      // ...and as datagram; the id's QP type says which
  WireEce ece;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Opens a new kernel event channel; returns the fd or -errno.
  virtual int open_channel() = 0;
  virtual int create_id(int fd, uint64_t uid, uint16_t ps, uint8_t qp_type,
                        uint32_t* id) = 0;
  virtual int destroy_id(int fd, uint32_t id, uint32_t* events_reported) = 0;
  virtual int bind(int fd, uint32_t id, const sockaddr* addr, socklen_t len) = 0;
  virtual int resolve_addr(int fd, uint32_t id, const sockaddr* src,
                           socklen_t src_len, const sockaddr* dst,
                           socklen_t dst_len, uint32_t timeout_ms) = 0;
  virtual int query_addr(int fd, uint32_t id, WireAddr* out) = 0;
  // Source and destination GIDs (raw 16 bytes each) of a bound id.
  virtual int query_gid(int fd, uint32_t id, uint8_t sgid[16],
                        uint8_t dgid[16]) = 0;
  // Blocks (unless fd is non-blocking) until an event is available.
  virtual int get_event(int fd, WireEvent* out) = 0;
  virtual int resolve_route(int fd, uint32_t id, uint32_t timeout_ms) = 0;
  // Path records of a resolved route (RDMA_USER_CM_QUERY_PATH).
  virtual int query_path(int fd, uint32_t id, std::vector<ibv_path_data>* out) = 0;
  virtual int connect(int fd, uint32_t id, const WireConnParam& param,
                      const WireEce& ece) = 0;
  virtual int listen(int fd, uint32_t id, int backlog) = 0;
  // uid 0 keeps the id's uid (the active side's accept of a response).
  virtual int accept(int fd, uint32_t id, uint64_t uid,
                     const WireConnParam& param, const WireEce& ece) = 0;
  virtual int reject(int fd, uint32_t id, const void* private_data,
                     uint8_t private_data_len, uint8_t reason) = 0;
  virtual int disconnect(int fd, uint32_t id) = 0;
  virtual int init_qp_attr(int fd, uint32_t id, ibv_qp_state state,
                           ibv_qp_attr* attr, int* mask) = 0;
  virtual int notify(int fd, uint32_t id, uint32_t event) = 0;
  virtual int set_option(int fd, uint32_t id, int level, int name,
                         const void* value, size_t len) = 0;
  // Moves the id from old_fd's channel to new_fd's.
  virtual int migrate_id(int new_fd, uint32_t id, int old_fd,
                         uint32_t* events_reported) = 0;
  virtual int join_mcast(int fd, uint32_t id, uint64_t uid, const sockaddr* addr,
                         socklen_t len, uint16_t join_flags,
                         uint32_t* mc_handle) = 0;
  virtual int leave_mcast(int fd, uint32_t mc_handle, uint32_t* events_reported) = 0;
};

// The process-wide transport: the kernel's unless a test installed another.
Transport& transport();
// For tests: installs t (not owned) as the transport; nullptr restores the kernel.
void set_transport(Transport* t);

}  // namespace rdmacm
