// The kernel's rdma_cm (/dev/infiniband/rdma_cm) through the ucma write() ABI.
// One function per command; no state beyond the ABI version check.
#include "core/transport.h"

#include <rdma/rdma_user_cm.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace rdmacm {
namespace {

constexpr const char* kDevice = "/dev/infiniband/rdma_cm";
constexpr const char* kAbiFile = "/sys/class/misc/rdma_cm/abi_version";
constexpr int kMinAbi = 3;  // oldest ABI that has the commands we issue
constexpr int kMaxAbi = RDMA_USER_CM_ABI_VERSION;

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

// Sends one command: header followed by the command body.
template <typename Cmd>
int execute(int fd, uint32_t command, const Cmd& body, size_t out_len = 0) {
  struct {
    rdma_ucm_cmd_hdr hdr;
    Cmd body;
  } msg{};
  msg.hdr.cmd = command;
  msg.hdr.in = sizeof(Cmd);
  msg.hdr.out = static_cast<uint16_t>(out_len);
  msg.body = body;
  // The kernel reads header and body as one contiguous buffer.
  static_assert(offsetof(decltype(msg), body) == sizeof(rdma_ucm_cmd_hdr));
  ssize_t n;
  do {
    n = ::write(fd, &msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  if (static_cast<size_t>(n) != sizeof(msg)) return -ENODATA;
  return 0;
}

uint64_t ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void copy_addr(sockaddr_storage* out, const __kernel_sockaddr_storage& in) {
  static_assert(sizeof(*out) == sizeof(in));
  std::memcpy(out, &in, sizeof(*out));
}

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
    rdma_ucm_create_id_resp resp{};
    rdma_ucm_create_id cmd{};
    cmd.uid = uid;
    cmd.response = ptr(&resp);
    cmd.ps = ps;
    cmd.qp_type = qp_type;
    int err = execute(fd, RDMA_USER_CM_CMD_CREATE_ID, cmd, sizeof(resp));
    if (!err) *id = resp.id;
    return err;
  }

  int destroy_id(int fd, uint32_t id, uint32_t* events_reported) override {
    rdma_ucm_destroy_id_resp resp{};
    rdma_ucm_destroy_id cmd{};
    cmd.response = ptr(&resp);
    cmd.id = id;
    int err = execute(fd, RDMA_USER_CM_CMD_DESTROY_ID, cmd, sizeof(resp));
    if (!err) *events_reported = resp.events_reported;
    return err;
  }

  int bind(int fd, uint32_t id, const sockaddr* addr, socklen_t len) override {
    rdma_ucm_bind cmd{};
    if (len > sizeof(cmd.addr)) return -EINVAL;
    cmd.id = id;
    cmd.addr_size = static_cast<uint16_t>(len);
    std::memcpy(&cmd.addr, addr, len);
    return execute(fd, RDMA_USER_CM_CMD_BIND, cmd);
  }

  int resolve_addr(int fd, uint32_t id, const sockaddr* src, socklen_t src_len,
                   const sockaddr* dst, socklen_t dst_len,
                   uint32_t timeout_ms) override {
    rdma_ucm_resolve_addr cmd{};
    if (src_len > sizeof(cmd.src_addr) || dst_len > sizeof(cmd.dst_addr))
      return -EINVAL;
    cmd.id = id;
    cmd.timeout_ms = timeout_ms;
    cmd.src_size = static_cast<uint16_t>(src_len);
    cmd.dst_size = static_cast<uint16_t>(dst_len);
    if (src) std::memcpy(&cmd.src_addr, src, src_len);
    std::memcpy(&cmd.dst_addr, dst, dst_len);
    return execute(fd, RDMA_USER_CM_CMD_RESOLVE_ADDR, cmd);
  }

  int query_addr(int fd, uint32_t id, WireAddr* out) override {
    rdma_ucm_query_addr_resp resp{};
    int err = query(fd, id, RDMA_USER_CM_QUERY_ADDR, &resp, sizeof(resp));
    if (err) return err;
    out->node_guid = resp.node_guid;
    out->port_num = resp.port_num;
    out->pkey = resp.pkey;
    out->ibdev_index = resp.ibdev_index;
    copy_addr(&out->src, resp.src_addr);
    copy_addr(&out->dst, resp.dst_addr);
    return 0;
  }

  int query_gid(int fd, uint32_t id, uint8_t sgid[16], uint8_t dgid[16]) override {
    // The GID query answers in the query-addr layout, with AF_IB addresses
    // whose 16-byte GID starts 8 bytes into each sockaddr_ib.
    rdma_ucm_query_addr_resp resp{};
    int err = query(fd, id, RDMA_USER_CM_QUERY_GID, &resp, sizeof(resp));
    if (err) return err;
    constexpr size_t kGidOffset = 8;  // sib_family, sib_pkey, sib_flowinfo
    std::memcpy(sgid, reinterpret_cast<const uint8_t*>(&resp.src_addr) + kGidOffset, 16);
    std::memcpy(dgid, reinterpret_cast<const uint8_t*>(&resp.dst_addr) + kGidOffset, 16);
    return 0;
  }

  int get_event(int fd, WireEvent* out) override {
    rdma_ucm_event_resp resp{};
    rdma_ucm_get_event cmd{};
    cmd.response = ptr(&resp);
    int err = execute(fd, RDMA_USER_CM_CMD_GET_EVENT, cmd, sizeof(resp));
    if (err) return err;
    out->uid = resp.uid;
    out->id = resp.id;
    out->event = resp.event;
    out->status = static_cast<int32_t>(resp.status);
    const rdma_ucm_conn_param& c = resp.param.conn;
    out->conn.qp_num = c.qp_num;
    out->conn.qkey = c.qkey;
    std::memcpy(out->conn.private_data, c.private_data, sizeof(c.private_data));
    out->conn.private_data_len = c.private_data_len;
    out->conn.srq = c.srq;
    out->conn.responder_resources = c.responder_resources;
    out->conn.initiator_depth = c.initiator_depth;
    out->conn.flow_control = c.flow_control;
    out->conn.retry_count = c.retry_count;
    out->conn.rnr_retry_count = c.rnr_retry_count;
    out->conn.valid = c.valid;
    out->ece_vendor_id = resp.ece.vendor_id;
    out->ece_attr_mod = resp.ece.attr_mod;
    return 0;
  }

 private:
  static int query(int fd, uint32_t id, uint32_t option, void* resp, size_t len) {
    rdma_ucm_query cmd{};
    cmd.response = ptr(resp);
    cmd.id = id;
    cmd.option = option;
    return execute(fd, RDMA_USER_CM_CMD_QUERY, cmd, len);
  }
};

KernelTransport kernel_transport;
Transport* current = &kernel_transport;

}  // namespace

Transport& transport() { return *current; }
void set_transport(Transport* t) { current = t ? t : &kernel_transport; }

}  // namespace rdmacm
