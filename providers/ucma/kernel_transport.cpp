// The kernel's rdma_cm (/dev/infiniband/rdma_cm) through the ucma write() ABI,
// in the layouts of <rdma/rdma_cma_abi.h> (the header we ship, as rdma-core's
// own librdmacm does). One function per command; no state beyond the ABI
// version check.
#include "providers/ucma/kernel_transport.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma_abi.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace rdmacm::ucma {
namespace {

using core::Transport;

constexpr const char* kDevice = "/dev/infiniband/rdma_cm";
constexpr const char* kAbiFile = "/sys/class/misc/rdma_cm/abi_version";
constexpr int kMinAbi = RDMA_USER_CM_MIN_ABI_VERSION;  // oldest with the commands we issue
constexpr int kMaxAbi = RDMA_USER_CM_MAX_ABI_VERSION;

// Checks the kernel's ucma ABI version once; returns 0 or -errno.
int check_abi() {
  static std::once_flag once;
  static int result = 0;
  std::call_once(once, [] {
    int version = kMaxAbi;  // older kernels lack the file and speak the newest
    if (FILE* f = std::fopen(kAbiFile, "re")) {
      if (std::fscanf(f, "%d", &version) != 1) version = kMaxAbi;
      std::fclose(f);
    }
    if (version < kMinAbi || version > kMaxAbi) {
      std::fprintf(stderr,
                   "librdmacm: kernel rdma_cm ABI version %d unsupported "
                   "(need %d..%d)\n",
                   version, kMinAbi, kMaxAbi);
      result = -ENOSYS;
    }
  });
  return result;
}

// Sends one command: a ucma_abi_* struct whose first fields are the header.
// Only GET_EVENT sleeps interruptibly; its EINTR goes back to the application
// (as with rdma-core, so a signal handler installed without SA_RESTART can
// stop a blocked rdma_get_cm_event). Any other command interrupted before the
// kernel acted is sent again.
template <typename Cmd>
int execute(int fd, uint32_t command, Cmd& cmd, size_t out_len = 0) {
  static_assert(offsetof(Cmd, cmd) == 0 && sizeof(Cmd) > sizeof(ucma_abi_cmd_hdr));
  cmd.cmd = command;
  cmd.in = sizeof(Cmd) - sizeof(ucma_abi_cmd_hdr);
  cmd.out = static_cast<uint16_t>(out_len);
  ssize_t n;
  do {
    n = ::write(fd, &cmd, sizeof(cmd));
  } while (n < 0 && errno == EINTR && command != UCMA_CMD_GET_EVENT);
  if (n < 0) return -errno;
  if (static_cast<size_t>(n) != sizeof(cmd)) return -ENODATA;
  return 0;
}

uint64_t ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

class KernelTransport final : public Transport {
 public:
  int open_channel() override {
    if (int err = check_abi()) return err;
    int fd = ::open(kDevice, O_RDWR | O_CLOEXEC);
    if (fd >= 0) return fd;
    // No rdma_cm device node means no RDMA here: say so as rdma-core does.
    return errno == ENOENT || errno == ENXIO ? -ENODEV : -errno;
  }

  int create_id(int fd, uint64_t uid, uint16_t ps, uint8_t qp_type,
                uint32_t* id) override {
    ucma_abi_create_id_resp resp{};
    ucma_abi_create_id cmd{};
    cmd.uid = uid;
    cmd.response = ptr(&resp);
    cmd.ps = ps;
    cmd.qp_type = qp_type;
    int err = execute(fd, UCMA_CMD_CREATE_ID, cmd, sizeof(resp));
    if (!err) *id = resp.id;
    return err;
  }

  int destroy_id(int fd, uint32_t id, uint32_t* events_reported) override {
    return release(fd, UCMA_CMD_DESTROY_ID, id, events_reported);
  }

  int bind(int fd, uint32_t id, const sockaddr* addr, socklen_t len) override {
    ucma_abi_bind cmd{};
    if (len > sizeof(cmd.addr)) return -EINVAL;
    cmd.id = id;
    cmd.addr_size = static_cast<uint16_t>(len);
    std::memcpy(&cmd.addr, addr, len);
    return execute(fd, UCMA_CMD_BIND, cmd);
  }

  int resolve_addr(int fd, uint32_t id, const sockaddr* src, socklen_t src_len,
                   const sockaddr* dst, socklen_t dst_len,
                   uint32_t timeout_ms) override {
    ucma_abi_resolve_addr cmd{};
    if (src_len > sizeof(cmd.src_addr) || dst_len > sizeof(cmd.dst_addr))
      return -EINVAL;
    cmd.id = id;
    cmd.timeout_ms = timeout_ms;
    cmd.src_size = static_cast<uint16_t>(src_len);
    cmd.dst_size = static_cast<uint16_t>(dst_len);
    if (src) std::memcpy(&cmd.src_addr, src, src_len);
    std::memcpy(&cmd.dst_addr, dst, dst_len);
    return execute(fd, UCMA_CMD_RESOLVE_ADDR, cmd);
  }

  int query_addr(int fd, uint32_t id, ucma_abi_query_addr_resp* out) override {
    *out = {};
    return query(fd, id, UCMA_QUERY_ADDR, out, sizeof(*out));
  }

  int query_gid(int fd, uint32_t id, uint8_t sgid[16], uint8_t dgid[16]) override {
    // The GID query answers in the query-addr layout, with AF_IB addresses
    // whose 16-byte GID starts 8 bytes into each sockaddr_ib.
    ucma_abi_query_addr_resp resp{};
    int err = query(fd, id, UCMA_QUERY_GID, &resp, sizeof(resp));
    if (err) return err;
    constexpr size_t kGidOffset = 8;  // sib_family, sib_pkey, sib_flowinfo
    std::memcpy(sgid, reinterpret_cast<const uint8_t*>(&resp.src_addr) + kGidOffset, 16);
    std::memcpy(dgid, reinterpret_cast<const uint8_t*>(&resp.dst_addr) + kGidOffset, 16);
    return 0;
  }

  int get_event(int fd, ucma_abi_event_resp* out) override {
    // The kernel writes all of it but the ECE, which kernels before 5.10 lack.
    out->ece = {};
    ucma_abi_get_event cmd{};
    cmd.response = ptr(out);
    return execute(fd, UCMA_CMD_GET_EVENT, cmd, sizeof(*out));
  }

  int resolve_route(int fd, uint32_t id, uint32_t timeout_ms) override {
    ucma_abi_resolve_route cmd{};
    cmd.id = id;
    cmd.timeout_ms = timeout_ms;
    return execute(fd, UCMA_CMD_RESOLVE_ROUTE, cmd);
  }

  int query_path(int fd, uint32_t id, ibv_path_data* out, size_t* n) override {
    // Room for the primary and alternate paths of both directions and more.
    constexpr size_t kMaxPaths = 6;
    // The kernel writes the header and num_paths records.
    alignas(8) uint8_t resp[sizeof(ucma_abi_query_path_resp) + kMaxPaths * sizeof(ibv_path_data)];
    std::memset(resp, 0, sizeof(ucma_abi_query_path_resp));
    int err = query(fd, id, UCMA_QUERY_PATH, resp, sizeof(resp));
    if (err) return err;
    uint32_t num_paths;
    std::memcpy(&num_paths, resp + offsetof(ucma_abi_query_path_resp, num_paths),
                sizeof(num_paths));
    *n = std::min<size_t>({num_paths, kMaxPaths, *n});
    if (*n)
      std::memcpy(out, resp + sizeof(ucma_abi_query_path_resp), *n * sizeof(ibv_path_data));
    return 0;
  }

  int connect(int fd, uint32_t id, const ucma_abi_conn_param& param,
              const ucma_abi_ece& ece) override {
    ucma_abi_connect cmd{};
    cmd.conn_param = param;
    cmd.id = id;
    cmd.ece = ece;
    return execute(fd, UCMA_CMD_CONNECT, cmd);
  }

  int listen(int fd, uint32_t id, int backlog) override {
    ucma_abi_listen cmd{};
    cmd.id = id;
    cmd.backlog = static_cast<uint32_t>(backlog);
    return execute(fd, UCMA_CMD_LISTEN, cmd);
  }

  int accept(int fd, uint32_t id, uint64_t uid, const ucma_abi_conn_param& param,
             const ucma_abi_ece& ece) override {
    ucma_abi_accept cmd{};
    cmd.uid = uid;
    cmd.conn_param = param;
    cmd.id = id;
    cmd.ece = ece;
    return execute(fd, UCMA_CMD_ACCEPT, cmd);
  }

  int reject(int fd, uint32_t id, const void* private_data,
             uint8_t private_data_len, uint8_t reason) override {
    ucma_abi_reject cmd{};
    cmd.id = id;
    cmd.reason = reason;
    if (private_data && private_data_len) {
      std::memcpy(cmd.private_data, private_data, private_data_len);
      cmd.private_data_len = private_data_len;
    }
    return execute(fd, UCMA_CMD_REJECT, cmd);
  }

  int disconnect(int fd, uint32_t id) override {
    ucma_abi_disconnect cmd{};
    cmd.id = id;
    return execute(fd, UCMA_CMD_DISCONNECT, cmd);
  }

  int init_qp_attr(int fd, uint32_t id, ibv_qp_state state, ibv_qp_attr* attr,
                   int* mask) override {
    ib_uverbs_qp_attr resp;  // the kernel writes it all
    ucma_abi_init_qp_attr cmd{};
    cmd.response = ptr(&resp);
    cmd.id = id;
    cmd.qp_state = state;
    int err = execute(fd, UCMA_CMD_INIT_QP_ATTR, cmd, sizeof(resp));
    if (err) return err;
    ibv_copy_qp_attr_from_kern(attr, &resp);
    attr->qp_state = state;  // the converter leaves it to the caller, as rdma-core's does
    *mask = static_cast<int>(resp.qp_attr_mask);
    return 0;
  }

  int notify(int fd, uint32_t id, uint32_t event) override {
    ucma_abi_notify cmd{};
    cmd.id = id;
    cmd.event = event;
    return execute(fd, UCMA_CMD_NOTIFY, cmd);
  }

  int set_option(int fd, uint32_t id, int level, int name, const void* value,
                 size_t len) override {
    ucma_abi_set_option cmd{};
    cmd.optval = ptr(value);
    cmd.id = id;
    cmd.level = static_cast<uint32_t>(level);
    cmd.optname = static_cast<uint32_t>(name);
    cmd.optlen = static_cast<uint32_t>(len);
    return execute(fd, UCMA_CMD_SET_OPTION, cmd);
  }

  int migrate_id(int new_fd, uint32_t id, int old_fd,
                 uint32_t* events_reported) override {
    ucma_abi_migrate_resp resp{};
    ucma_abi_migrate_id cmd{};
    cmd.response = ptr(&resp);
    cmd.id = id;
    cmd.fd = static_cast<uint32_t>(old_fd);
    int err = execute(new_fd, UCMA_CMD_MIGRATE_ID, cmd, sizeof(resp));
    if (!err) *events_reported = resp.events_reported;
    return err;
  }

  int join_mcast(int fd, uint32_t id, uint64_t uid, const sockaddr* addr,
                 socklen_t len, uint16_t join_flags, uint32_t* mc_handle) override {
    ucma_abi_create_id_resp resp{};
    ucma_abi_join_mcast cmd{};
    if (len > sizeof(cmd.addr)) return -EINVAL;
    cmd.response = ptr(&resp);
    cmd.uid = uid;
    cmd.id = id;
    cmd.addr_size = static_cast<uint16_t>(len);
    cmd.join_flags = join_flags;
    std::memcpy(&cmd.addr, addr, len);
    int err = execute(fd, UCMA_CMD_JOIN_MCAST, cmd, sizeof(resp));
    if (!err) *mc_handle = resp.id;
    return err;
  }

  int leave_mcast(int fd, uint32_t mc_handle, uint32_t* events_reported) override {
    return release(fd, UCMA_CMD_LEAVE_MCAST, mc_handle, events_reported);
  }

 private:
  // DESTROY_ID and LEAVE_MCAST share a layout: a handle in, the number of
  // events reported for it out.
  static int release(int fd, uint32_t command, uint32_t handle, uint32_t* events_reported) {
    ucma_abi_destroy_id_resp resp{};
    ucma_abi_destroy_id cmd{};
    cmd.response = ptr(&resp);
    cmd.id = handle;
    int err = execute(fd, command, cmd, sizeof(resp));
    if (!err) *events_reported = resp.events_reported;
    return err;
  }

  static int query(int fd, uint32_t id, uint32_t option, void* resp, size_t len) {
    ucma_abi_query cmd{};
    cmd.response = ptr(resp);
    cmd.id = id;
    cmd.option = option;
    return execute(fd, UCMA_CMD_QUERY, cmd, len);
  }
};

constinit KernelTransport kernel;

}  // namespace

core::Transport& kernel_transport() { return kernel; }

}  // namespace rdmacm::ucma
