// The seam between the core and the kernel: one call per ucma command.
//
// The kernel's own layouts cross it, as <rdma/rdma_cma_abi.h> (the header we
// ship, rdma-core's names) declares them: connection and datagram parameters,
// ECE data, the event and address-query answers. The core translates them
// once into the public structs (core/events.cpp); a provider only copies them.
//
// providers/ucma implements it over /dev/infiniband/rdma_cm; unit tests put a
// scripted fake behind it. Which one is used is chosen here (install_transport
// from the composition root in api/, set_transport from tests): the core links
// without any provider. Every call returns 0 (or a non-negative value where
// stated) on success and -errno on failure; none throws.
#pragma once

#include <atomic>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma_abi.h>
#include <sys/socket.h>

#include <cstdint>
#include <vector>

namespace rdmacm::core {

class Transport {
 public:
  // Opens a new kernel event channel; returns the fd or -errno.
  virtual int open_channel() = 0;
  virtual int create_id(int fd, uint64_t uid, uint16_t ps, uint8_t qp_type,
                        uint32_t* id) = 0;
  virtual int destroy_id(int fd, uint32_t id, uint32_t* events_reported) = 0;
  virtual int bind(int fd, uint32_t id, const sockaddr* addr, socklen_t len) = 0;
  virtual int resolve_addr(int fd, uint32_t id, const sockaddr* src,
                           socklen_t src_len, const sockaddr* dst,
                           socklen_t dst_len, uint32_t timeout_ms) = 0;
  // Address state of the id (node_guid 0 while it is bound to no device).
  virtual int query_addr(int fd, uint32_t id, ucma_abi_query_addr_resp* out) = 0;
  // Source and destination GIDs (raw 16 bytes each) of a bound id.
  virtual int query_gid(int fd, uint32_t id, uint8_t sgid[16],
                        uint8_t dgid[16]) = 0;
  // Blocks (unless fd is non-blocking) until an event is available. For a
  // connection request, out->id is the new kernel id's handle.
  virtual int get_event(int fd, ucma_abi_event_resp* out) = 0;
  virtual int resolve_route(int fd, uint32_t id, uint32_t timeout_ms) = 0;
  // Path records of a resolved route (UCMA_QUERY_PATH): at most *n of them
  // into out; *n is then how many there are.
  virtual int query_path(int fd, uint32_t id, ibv_path_data* out, size_t* n) = 0;
  virtual int connect(int fd, uint32_t id, const ucma_abi_conn_param& param,
                      const ucma_abi_ece& ece) = 0;
  virtual int listen(int fd, uint32_t id, int backlog) = 0;
  // uid 0 keeps the id's uid (the active side's accept of a response).
  virtual int accept(int fd, uint32_t id, uint64_t uid,
                     const ucma_abi_conn_param& param, const ucma_abi_ece& ece) = 0;
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

 protected:
  // Never deleted through the seam; trivial, so that a provider's instance
  // can be constant-initialised and is never destroyed at exit (atexit
  // handlers of the application may still call the library).
  ~Transport() = default;
};

namespace detail {
// What transport() answers, kept by the two setters below (one load per call:
// a connection makes some twenty).
extern std::atomic<Transport*> current_transport;
}  // namespace detail

// The process-wide transport: a test's if one is set, else the installed
// one, else one that answers every call with -ENODEV.
inline Transport& transport() {
  return *detail::current_transport.load(std::memory_order_acquire);
}
// The composition root's choice (api/transport_root.cpp: the kernel's).
void install_transport(Transport* t);
// For tests: uses t (not owned) instead; nullptr goes back to the installed one.
void set_transport(Transport* t);

}  // namespace rdmacm::core

// libibverbs exports the kernel-to-verbs converters rdma-core's librdmacm
// uses, but Debian does not ship their header (infiniband/marshall.h).
extern "C" {
void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src);
void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src);
}
