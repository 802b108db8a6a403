#include "cm_print.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace iwt {

uint16_t case_port;

void say(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs("  ", stdout);
  std::vprintf(fmt, ap);
  std::fputc('\n', stdout);
  va_end(ap);
  std::fflush(stdout);
}

void ret(const char* what, int r) {
  if (r == 0) {
    say("%s = 0", what);
    return;
  }
  const char* name = strerrorname_np(errno);
  say("%s = %d %s", what, r, name ? name : "?");
}

void fill(uint8_t* buf, int len, uint8_t seed) {
  for (int i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(seed + 7 * i);
}

namespace {

const char* ev_name(int e) { return rdma_event_str(static_cast<rdma_cm_event_type>(e)); }

// "len 56 pattern" when the data is the seed's pattern, else its first bytes.
void data(char* out, size_t n, const void* p, uint8_t len, uint8_t seed) {
  if (!len) {
    std::snprintf(out, n, "len 0 %s", p ? "ptr" : "null");
    return;
  }
  if (!p) {
    std::snprintf(out, n, "len %u null", len);
    return;
  }
  uint8_t want[256];
  fill(want, len, seed);
  if (!std::memcmp(p, want, len)) {
    std::snprintf(out, n, "len %u pattern", len);
    return;
  }
  const auto* b = static_cast<const uint8_t*>(p);
  std::snprintf(out, n, "len %u other %02x%02x%02x%02x", len, b[0], len > 1 ? b[1] : 0,
                len > 2 ? b[2] : 0, len > 3 ? b[3] : 0);
}

void addr(char* out, size_t n, const sockaddr* sa) {
  char ip[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  switch (sa->sa_family) {
    case AF_INET: {
      auto* in = reinterpret_cast<const sockaddr_in*>(sa);
      inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
      port = ntohs(in->sin_port);
      break;
    }
    case AF_INET6: {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
      inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
      port = ntohs(in6->sin6_port);
      break;
    }
    case 0:
      std::snprintf(out, n, "none");
      return;
    default:
      std::snprintf(out, n, "family %d", sa->sa_family);
      return;
  }
  if (port == 0)
    std::snprintf(out, n, "%s:0", ip);
  else if (port == case_port)
    std::snprintf(out, n, "%s:listen", ip);
  else
    std::snprintf(out, n, "%s:eph", ip);
}

void gid(char* out, size_t n, const ibv_gid& g) {
  size_t at = 0;
  for (int i = 0; i < 16 && at + 3 < n; ++i)
    at += static_cast<size_t>(std::snprintf(out + at, n - at, "%02x", g.raw[i]));
}

const char* qp_state(int s) {
  static const char* names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"};
  return s >= 0 && s < 8 ? names[s] : "?";
}

}  // namespace

void event(const char* who, const rdma_cm_event* ev, uint8_t seed) {
  if (!ev) {
    say("%s: no event", who);
    return;
  }
  char d[64];
  if (ev->id && ev->id->qp_type == IBV_QPT_UD) {
    const rdma_ud_param& u = ev->param.ud;
    data(d, sizeof d, u.private_data, u.private_data_len, seed);
    say("%s: %s status %d, ud pdata %s, qkey %#x", who, ev_name(ev->event), ev->status, d,
        u.qkey);
    return;
  }
  const rdma_conn_param& c = ev->param.conn;
  data(d, sizeof d, c.private_data, c.private_data_len, seed);
  say("%s: %s status %d, listen_id %s, pdata %s, resp_res %u init_depth %u flow %u retry %u "
      "rnr %u srq %u qp_num %s",
      who, ev_name(ev->event), ev->status, ev->listen_id ? "set" : "null", d,
      c.responder_resources, c.initiator_depth, c.flow_control, c.retry_count, c.rnr_retry_count,
      c.srq, c.qp_num ? "set" : "0");
}

void id(const char* who, const rdma_cm_id* id) {
  char src[80], dst[80], sgid[40], dgid[40];
  addr(src, sizeof src, &id->route.addr.src_addr);
  addr(dst, sizeof dst, &id->route.addr.dst_addr);
  gid(sgid, sizeof sgid, id->route.addr.addr.ibaddr.sgid);
  gid(dgid, sizeof dgid, id->route.addr.addr.ibaddr.dgid);
  const char* transport = "no device";
  if (id->verbs) {
    switch (id->verbs->device->transport_type) {
      case IBV_TRANSPORT_IB:
        transport = "ib";
        break;
      case IBV_TRANSPORT_IWARP:
        transport = "iwarp";
        break;
      default:
        transport = "other";
    }
  }
  say("%s id: %s %s port %u ps %#x qp_type %d pd %s qp %s src %s dst %s", who,
      id->verbs ? id->verbs->device->name : "-", transport, id->port_num, id->ps, id->qp_type,
      id->pd ? "set" : "null", id->qp ? "set" : "null", src, dst);
  say("%s id: sgid %s dgid %s pkey %#x num_paths %d path_rec %s", who, sgid, dgid,
      ntohs(id->route.addr.addr.ibaddr.pkey), id->route.num_paths,
      id->route.path_rec ? "set" : "null");
}

void qp(const char* who, ibv_qp* qp) {
  if (!qp) {
    say("%s qp: none", who);
    return;
  }
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  int r = ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MAX_QP_RD_ATOMIC |
                                   IBV_QP_MAX_DEST_RD_ATOMIC,
                       &init);
  if (r) {
    say("%s qp: ibv_query_qp = %d", who, r);
    return;
  }
  say("%s qp: state %s access %#x max_rd_atomic %u max_dest_rd_atomic %u", who,
      qp_state(a.qp_state), a.qp_access_flags, a.max_rd_atomic, a.max_dest_rd_atomic);
}

void init_attrs(const char* who, rdma_cm_id* id) {
  static const ibv_qp_state states[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                                        IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};
  for (ibv_qp_state s : states) {
    ibv_qp_attr a{};
    a.qp_state = s;
    int mask = -1;
    char what[96];
    std::snprintf(what, sizeof what, "%s rdma_init_qp_attr(%s)", who, qp_state(s));
    if (int r = rdma_init_qp_attr(id, &a, &mask)) {
      ret(what, r);
      continue;
    }
    char more[160] = "";
    size_t at = 0;
    auto add = [&](const char* fmt, unsigned v) {
      at += static_cast<size_t>(std::snprintf(more + at, sizeof more - at, fmt, v));
    };
    if (mask & IBV_QP_STATE) add(" state %u", a.qp_state);
    if (mask & IBV_QP_ACCESS_FLAGS) add(" access %#x", a.qp_access_flags);
    if (mask & IBV_QP_PORT) add(" port %u", a.port_num);
    if (mask & IBV_QP_PKEY_INDEX) add(" pkey_index %u", a.pkey_index);
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) add(" max_rd_atomic %u", a.max_rd_atomic);
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) add(" max_dest_rd_atomic %u", a.max_dest_rd_atomic);
    if (mask & IBV_QP_PATH_MTU) add(" mtu %u", a.path_mtu);
    if (mask & IBV_QP_TIMEOUT) add(" timeout %u", a.timeout);
    if (mask & IBV_QP_QKEY) add(" qkey %#x", a.qkey);
    say("%s = 0 mask %#x%s", what, static_cast<unsigned>(mask), more);
  }
}

}  // namespace iwt
