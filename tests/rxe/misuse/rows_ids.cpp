// Identifiers and addressing: rdma_create_id, rdma_destroy_id,
// rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_get_src_port,
// rdma_get_dst_port, rdma_set_option, rdma_migrate_id.
#include <arpa/inet.h>
#include <infiniband/ib.h>

#include <cstring>

#include "handles.h"

namespace rdmacm::misuse {
namespace {

sockaddr_storage family_addr(int family) {
  sockaddr_storage ss{};
  ss.ss_family = static_cast<sa_family_t>(family);
  return ss;
}

}  // namespace

void add_id_rows(std::vector<Row>& rows) {
  // rdma_create_id
  rows.push_back({"create_id(NULL out)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_create_id(s.channel(), nullptr, nullptr, RDMA_PS_TCP)); },
                  "rdma-core dereferences the NULL argument"});
  for (int ps : {0, 1, 0x0100, 0x0105, 0x0107, 0xFFFF, -1}) {
    rows.push_back({"create_id(port space " + std::to_string(ps) + ")", "-1 EINVAL",
                    [ps](State& s) { rdma_cm_id* id;
                                     return ret(rdma_create_id(s.channel(), &id, nullptr,
                                                               static_cast<rdma_port_space>(ps))); }});
  }
  rows.push_back({"create_id(destroyed channel)", "-1 EINVAL",
                  [](State& s) { auto* ch = s.dead_channel(); rdma_cm_id* id; reset_errno();
                                 return ret(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)); },
                  "ours validates every handle against its live objects"});
  rows.push_back({"create_id(forged channel)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* id;
                                 return ret(rdma_create_id(s.forged_channel(), &id, nullptr, RDMA_PS_TCP)); },
                  "ours validates every handle against its live objects"});

  // rdma_destroy_id
  add_bad_id_rows(rows, "destroy_id", [](State&, rdma_cm_id* id) { return ret(rdma_destroy_id(id)); });
  rows.push_back({"destroy_id(listener with an acknowledged, unanswered request)", "0",
                  [](State& s) { s.request(); return ret(rdma_destroy_id(s.listener())); }});

  // rdma_bind_addr
  auto bind = [](State&, rdma_cm_id* id) {
    sockaddr_in a{}; a.sin_family = AF_INET;
    return ret(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a))); };
  add_bad_id_rows(rows, "bind_addr", bind);
  rows.push_back({"bind_addr(NULL address)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_bind_addr(s.fresh(), nullptr)); }});
  for (int family : {AF_UNSPEC, AF_UNIX, AF_PACKET, 255}) {
    rows.push_back({"bind_addr(family " + std::to_string(family) + ")", "-1 EINVAL",
                    [family](State& s) { auto a = family_addr(family);
                                         return ret(rdma_bind_addr(s.fresh(), reinterpret_cast<sockaddr*>(&a))); }});
  }
  rows.push_back({"bind_addr(twice)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* id = s.bound(); return ret(rdma_bind_addr(id, s.device_addr())); }});
  rows.push_back({"bind_addr(port in use)", "-1 EADDRINUSE",
                  [](State& s) { uint16_t port = s.listen_port();
                                 return ret(rdma_bind_addr(s.fresh(), s.device_addr(ntohs(port)))); }});
  rows.push_back({"bind_addr(address of no device)", "-1 EADDRNOTAVAIL",
                  [](State& s) { sockaddr_in a{}; a.sin_family = AF_INET;
                                 inet_pton(AF_INET, "192.0.2.1", &a.sin_addr);
                                 return ret(rdma_bind_addr(s.fresh(), reinterpret_cast<sockaddr*>(&a))); }});
  rows.push_back({"bind_addr(listening id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_bind_addr(s.listener(), s.device_addr())); }});

  // rdma_resolve_addr
  auto resolve = [](State& s, rdma_cm_id* id) { return ret(rdma_resolve_addr(id, nullptr, s.device_addr(7471), 1000)); };
  add_bad_id_rows(rows, "resolve_addr", resolve);
  rows.push_back({"resolve_addr(NULL destination)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_resolve_addr(s.fresh(), nullptr, nullptr, 1000)); }});
  for (int family : {AF_UNSPEC, AF_UNIX, 255}) {
    rows.push_back({"resolve_addr(destination family " + std::to_string(family) + ")", "-1 EINVAL",
                    [family](State& s) { auto a = family_addr(family);
                                         return ret(rdma_resolve_addr(s.fresh(), nullptr, reinterpret_cast<sockaddr*>(&a), 1000)); }});
    rows.push_back({"resolve_addr(source family " + std::to_string(family) + ")", "-1 EINVAL",
                    [family](State& s) { auto a = family_addr(family);
                                         return ret(rdma_resolve_addr(s.fresh(), reinterpret_cast<sockaddr*>(&a), s.device_addr(7471), 1000)); }});
  }
  for (int t : {-1, -1000}) {
    rows.push_back({"resolve_addr(timeout " + std::to_string(t) + ")", "-1 EINVAL",
                    [t](State& s) { return ret(rdma_resolve_addr(s.fresh(), nullptr, s.device_addr(7471), t)); },
                    "ours refuses a negative timeout"});
  }
  rows.push_back({"resolve_addr(timeout 0)", "0",
                  [](State& s) { return ret(rdma_resolve_addr(s.fresh(), nullptr, s.device_addr(7471), 0)); }});
  rows.push_back({"resolve_addr(mismatched families)", "-1 EINVAL",
                  [](State& s) { sockaddr_in6 d{}; d.sin6_family = AF_INET6; d.sin6_addr = in6addr_loopback;
                                 return ret(rdma_resolve_addr(s.fresh(), s.device_addr(), reinterpret_cast<sockaddr*>(&d), 1000)); }});
  rows.push_back({"resolve_addr(listening id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_resolve_addr(s.listener(), nullptr, s.device_addr(7471), 1000)); }});
  rows.push_back({"resolve_addr(twice)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* id = s.resolved();
                                 return ret(rdma_resolve_addr(id, nullptr, s.device_addr(7471), 1000)); }});

  // rdma_resolve_route
  add_bad_id_rows(rows, "resolve_route", [](State&, rdma_cm_id* id) { return ret(rdma_resolve_route(id, 1000)); });
  rows.push_back({"resolve_route(unresolved id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_resolve_route(s.fresh(), 1000)); },
                  "rdma-core dereferences the id's missing device"});
  rows.push_back({"resolve_route(bound id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_resolve_route(s.bound(), 1000)); }});
  rows.push_back({"resolve_route(listener)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_resolve_route(s.listener(), 1000)); }});
  rows.push_back({"resolve_route(timeout -1)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_resolve_route(s.resolved(), -1)); },
                  "ours refuses a negative timeout"});

  // Ports
  add_bad_id_rows(rows, "get_src_port", [](State&, rdma_cm_id* id) { return value(rdma_get_src_port(id)); },
                  "0");
  add_bad_id_rows(rows, "get_dst_port", [](State&, rdma_cm_id* id) { return value(rdma_get_dst_port(id)); },
                  "0");
  rows.push_back({"get_src_port(fresh id)", "0",
                  [](State& s) { return value(rdma_get_src_port(s.fresh())); }});
  rows.push_back({"get_dst_port(listener)", "0",
                  [](State& s) { return value(rdma_get_dst_port(s.listener())); }});

  // rdma_set_option
  add_bad_id_rows(rows, "set_option", [](State&, rdma_cm_id* id) {
    uint8_t tos = 0; return ret(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1)); });
  struct Opt { const char* name; int level, opt; size_t len; bool null; std::string ours; };
  for (const Opt& o : std::vector<Opt>{
           {"TOS, NULL value", RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, 1, true, "-1 EFAULT"},
           {"TOS, length 0", RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, 0, false, "-1 EINVAL"},
           {"TOS, length 4", RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, 4, false, "-1 EINVAL"},
           {"REUSEADDR, length 1", RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, 1, false, "-1 EINVAL"},
           {"AFONLY, length 2", RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, 2, false, "-1 EINVAL"},
           {"ACK_TIMEOUT, length 0", RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, 0, false, "-1 EINVAL"},
           {"unknown name 99", RDMA_OPTION_ID, 99, 4, false, "-1 ENOSYS"},
           {"unknown level 7", 7, 0, 4, false, "-1 ENOSYS"},
           {"IB_PATH, length 1", RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, 1, false, "-1 EINVAL"},
           {"IB_PATH, huge length", RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, size_t{1} << 33, false, "-1 EINVAL"},
       }) {
    rows.push_back({std::string("set_option(") + o.name + ")", o.ours, [o](State& s) {
                      static uint8_t buf[64] = {};
                      return ret(rdma_set_option(s.fresh(), o.level, o.opt, o.null ? nullptr : buf, o.len)); }});
  }
  rows.push_back({"set_option(REUSEADDR after bind)", "0",
                  [](State& s) { int one = 1;
                                 return ret(rdma_set_option(s.bound(), RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one))); }});

  // rdma_migrate_id
  add_bad_id_rows(rows, "migrate_id", [](State& s, rdma_cm_id* id) {
    rdma_event_channel* to = rdma_create_event_channel(); reset_errno(); (void)s;
    return ret(rdma_migrate_id(id, to)); });
  rows.push_back({"migrate_id(to destroyed channel)", "-1 EINVAL",
                  [](State& s) { rdma_cm_id* id = s.fresh(); auto* ch = s.dead_channel(); reset_errno();
                                 return ret(rdma_migrate_id(id, ch)); },
                  "ours validates every handle against its live objects"});
  rows.push_back({"migrate_id(to forged channel)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_migrate_id(s.fresh(), s.forged_channel())); },
                  "ours validates every handle against its live objects"});
  rows.push_back({"migrate_id(to its own channel)", "0",
                  [](State& s) { return ret(rdma_migrate_id(s.fresh(), s.channel())); }});
  rows.push_back({"migrate_id(sync id to NULL)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_migrate_id(s.sync_id(), nullptr)); }});
  rows.push_back({"migrate_id(to NULL: becomes synchronous)", "0",
                  [](State& s) { return ret(rdma_migrate_id(s.fresh(), nullptr)); }});
}

}  // namespace rdmacm::misuse
