// The kernel's rdma_cm (/dev/infiniband/rdma_cm) through the ucma write() ABI.
// One function per command; no state beyond the ABI version check.
#include "core/transport.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_user_cm.h>

#include <cerrno>
#include <algorithm>
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

// Sends one command: header followed by the command body. Only GET_EVENT
// sleeps interruptibly; its EINTR goes back to the application (as with
// rdma-core, so a signal handler installed without SA_RESTART can stop a
// blocked rdma_get_cm_event). Any other command interrupted before the kernel
// acted is sent again.
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
  } while (n < 0 && errno == EINTR && command != RDMA_USER_CM_CMD_GET_EVENT);
  if (n < 0) return -errno;
  if (static_cast<size_t>(n) != sizeof(msg)) return -ENODATA;
  return 0;
}

uint64_t ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void copy_addr(sockaddr_storage* out, const __kernel_sockaddr_storage& in) {
  static_assert(sizeof(*out) == sizeof(in));
  std::memcpy(out, &in, sizeof(*out));
}

void to_kernel(rdma_ucm_conn_param* out, const WireConnParam& in) {
  out->qp_num = in.qp_num;
  out->qkey = in.qkey;
  std::memcpy(out->private_data, in.private_data, sizeof(out->private_data));
  out->private_data_len = in.private_data_len;
  out->srq = in.srq;
  out->responder_resources = in.responder_resources;
  out->initiator_depth = in.initiator_depth;
  out->flow_control = in.flow_control;
  out->retry_count = in.retry_count;
  out->rnr_retry_count = in.rnr_retry_count;
  out->valid = in.valid;
}

void from_kernel(WireConnParam* out, const rdma_ucm_conn_param& in) {
  out->qp_num = in.qp_num;
  out->qkey = in.qkey;
  std::memcpy(out->private_data, in.private_data, sizeof(in.private_data));
  out->private_data_len = in.private_data_len;
  out->srq = in.srq;
  out->responder_resources = in.responder_resources;
  out->initiator_depth = in.initiator_depth;
  out->flow_control = in.flow_control;
  out->retry_count = in.retry_count;
  out->rnr_retry_count = in.rnr_retry_count;
  out->valid = in.valid;
}

void from_kernel(ibv_ah_attr* out, const ib_uverbs_ah_attr& in) {
  std::memcpy(out->grh.dgid.raw, in.grh.dgid, sizeof(in.grh.dgid));
  out->grh.flow_label = in.grh.flow_label;
  out->grh.sgid_index = in.grh.sgid_index;
  out->grh.hop_limit = in.grh.hop_limit;
  out->grh.traffic_class = in.grh.traffic_class;
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->is_global = in.is_global;
  out->port_num = in.port_num;
}

void from_kernel(ibv_qp_attr* out, const ib_uverbs_qp_attr& in) {
  out->qp_state = static_cast<ibv_qp_state>(in.qp_state);
  out->cur_qp_state = static_cast<ibv_qp_state>(in.cur_qp_state);
  out->path_mtu = static_cast<ibv_mtu>(in.path_mtu);
  out->path_mig_state = static_cast<ibv_mig_state>(in.path_mig_state);
  out->qkey = in.qkey;
  out->rq_psn = in.rq_psn;
  out->sq_psn = in.sq_psn;
  out->dest_qp_num = in.dest_qp_num;
  out->qp_access_flags = static_cast<int>(in.qp_access_flags);
  out->cap.max_send_wr = in.max_send_wr;
  out->cap.max_recv_wr = in.max_recv_wr;
  out->cap.max_send_sge = in.max_send_sge;
  out->cap.max_recv_sge = in.max_recv_sge;
  out->cap.max_inline_data = in.max_inline_data;
  from_kernel(&out->ah_attr, in.ah_attr);
  from_kernel(&out->alt_ah_attr, in.alt_ah_attr);
  out->pkey_index = in.pkey_index;
  out->alt_pkey_index = in.alt_pkey_index;
  out->en_sqd_async_notify = in.en_sqd_async_notify;
  out->sq_draining = in.sq_draining;
  out->max_rd_atomic = in.max_rd_atomic;
  out->max_dest_rd_atomic = in.max_dest_rd_atomic;
  out->min_rnr_timer = in.min_rnr_timer;
  out->port_num = in.port_num;
  out->timeout = in.timeout;
  out->retry_cnt = in.retry_cnt;
  out->rnr_retry = in.rnr_retry;
  out->alt_port_num = in.alt_port_num;
  out->alt_timeout = in.alt_timeout;
}

void from_kernel(WireUdParam* out, const rdma_ucm_ud_param& in) {
  out->qp_num = in.qp_num;
  out->qkey = in.qkey;
  from_kernel(&out->ah_attr, in.ah_attr);
  std::memcpy(out->private_data, in.private_data, sizeof(in.private_data));
  out->private_data_len = in.private_data_len;
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
    return release(fd, RDMA_USER_CM_CMD_DESTROY_ID, id, events_reported);
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
    from_kernel(&out->conn, resp.param.conn);
    from_kernel(&out->ud, resp.param.ud);
    out->ece.vendor_id = resp.ece.vendor_id;
    out->ece.attr_mod = resp.ece.attr_mod;
    return 0;
  }

  int resolve_route(int fd, uint32_t id, uint32_t timeout_ms) override {
    rdma_ucm_resolve_route cmd{};
    cmd.id = id;
    cmd.timeout_ms = timeout_ms;
    return execute(fd, RDMA_USER_CM_CMD_RESOLVE_ROUTE, cmd);
  }

  int query_path(int fd, uint32_t id, std::vector<ibv_path_data>* out) override {
    // Room for the primary and alternate paths of both directions and more.
    constexpr size_t kMaxPaths = 6;
    static_assert(sizeof(ib_path_rec_data) == sizeof(ibv_path_data));
    alignas(8) uint8_t resp[sizeof(rdma_ucm_query_path_resp) +
                            kMaxPaths * sizeof(ib_path_rec_data)] = {};
    int err = query(fd, id, RDMA_USER_CM_QUERY_PATH, resp, sizeof(resp));
    if (err) return err;
    uint32_t num_paths;
    std::memcpy(&num_paths, resp + offsetof(rdma_ucm_query_path_resp, num_paths),
                sizeof(num_paths));
    size_t n = std::min<size_t>(num_paths, kMaxPaths);
    out->resize(n);
    if (n)  // an empty vector's data() may be NULL
      std::memcpy(out->data(), resp + sizeof(rdma_ucm_query_path_resp),
                  n * sizeof(ibv_path_data));
    return 0;
  }

  int connect(int fd, uint32_t id, const WireConnParam& param,
              const WireEce& ece) override {
    rdma_ucm_connect cmd{};
    to_kernel(&cmd.conn_param, param);
    cmd.id = id;
    cmd.ece.vendor_id = ece.vendor_id;
    cmd.ece.attr_mod = ece.attr_mod;
    return execute(fd, RDMA_USER_CM_CMD_CONNECT, cmd);
  }

  int listen(int fd, uint32_t id, int backlog) override {
    rdma_ucm_listen cmd{};
    cmd.id = id;
    cmd.backlog = static_cast<uint32_t>(backlog);
    return execute(fd, RDMA_USER_CM_CMD_LISTEN, cmd);
  }

  int accept(int fd, uint32_t id, uint64_t uid, const WireConnParam& param,
             const WireEce& ece) override {
    rdma_ucm_accept cmd{};
    cmd.uid = uid;
    to_kernel(&cmd.conn_param, param);
    cmd.id = id;
    cmd.ece.vendor_id = ece.vendor_id;
    cmd.ece.attr_mod = ece.attr_mod;
    return execute(fd, RDMA_USER_CM_CMD_ACCEPT, cmd);
  }

  int reject(int fd, uint32_t id, const void* private_data,
             uint8_t private_data_len, uint8_t reason) override {
    rdma_ucm_reject cmd{};
    cmd.id = id;
    cmd.reason = reason;
    if (private_data && private_data_len) {
      std::memcpy(cmd.private_data, private_data, private_data_len);
      cmd.private_data_len = private_data_len;
    }
    return execute(fd, RDMA_USER_CM_CMD_REJECT, cmd);
  }

  int disconnect(int fd, uint32_t id) override {
    rdma_ucm_disconnect cmd{};
    cmd.id = id;
    return execute(fd, RDMA_USER_CM_CMD_DISCONNECT, cmd);
  }

  int init_qp_attr(int fd, uint32_t id, ibv_qp_state state, ibv_qp_attr* attr,
                   int* mask) override {
    ib_uverbs_qp_attr resp{};
    rdma_ucm_init_qp_attr cmd{};
    cmd.response = ptr(&resp);
    cmd.id = id;
    cmd.qp_state = state;
    int err = execute(fd, RDMA_USER_CM_CMD_INIT_QP_ATTR, cmd, sizeof(resp));
    if (err) return err;
    from_kernel(attr, resp);
    *mask = static_cast<int>(resp.qp_attr_mask);
    return 0;
  }

  int notify(int fd, uint32_t id, uint32_t event) override {
    rdma_ucm_notify cmd{};
    cmd.id = id;
    cmd.event = event;
    return execute(fd, RDMA_USER_CM_CMD_NOTIFY, cmd);
  }

  int set_option(int fd, uint32_t id, int level, int name, const void* value,
                 size_t len) override {
    rdma_ucm_set_option cmd{};
    cmd.optval = ptr(value);
    cmd.id = id;
    cmd.level = static_cast<uint32_t>(level);
    cmd.optname = static_cast<uint32_t>(name);
    cmd.optlen = static_cast<uint32_t>(len);
    return execute(fd, RDMA_USER_CM_CMD_SET_OPTION, cmd);
  }

  int migrate_id(int new_fd, uint32_t id, int old_fd,
                 uint32_t* events_reported) override {
    rdma_ucm_migrate_resp resp{};
    rdma_ucm_migrate_id cmd{};
    cmd.response = ptr(&resp);
    cmd.id = id;
    cmd.fd = static_cast<uint32_t>(old_fd);
    int err = execute(new_fd, RDMA_USER_CM_CMD_MIGRATE_ID, cmd, sizeof(resp));
    if (!err) *events_reported = resp.events_reported;
    return err;
  }

  int join_mcast(int fd, uint32_t id, uint64_t uid, const sockaddr* addr,
                 socklen_t len, uint16_t join_flags, uint32_t* mc_handle) override {
    rdma_ucm_create_id_resp resp{};
    rdma_ucm_join_mcast cmd{};
    if (len > sizeof(cmd.addr)) return -EINVAL;
    cmd.response = ptr(&resp);
    cmd.uid = uid;
    cmd.id = id;
    cmd.addr_size = static_cast<uint16_t>(len);
    cmd.join_flags = join_flags;
    std::memcpy(&cmd.addr, addr, len);
    int err = execute(fd, RDMA_USER_CM_CMD_JOIN_MCAST, cmd, sizeof(resp));
    if (!err) *mc_handle = resp.id;
    return err;
  }

  int leave_mcast(int fd, uint32_t mc_handle, uint32_t* events_reported) override {
    return release(fd, RDMA_USER_CM_CMD_LEAVE_MCAST, mc_handle, events_reported);
  }

 private:
  // DESTROY_ID and LEAVE_MCAST share a layout: a handle in, the number of
  // events reported for it out.
  static int release(int fd, uint32_t command, uint32_t handle, uint32_t* events_reported) {
    rdma_ucm_destroy_id_resp resp{};
    rdma_ucm_destroy_id cmd{};
    cmd.response = ptr(&resp);
    cmd.id = handle;
    int err = execute(fd, command, cmd, sizeof(resp));
    if (!err) *events_reported = resp.events_reported;
    return err;
  }

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
