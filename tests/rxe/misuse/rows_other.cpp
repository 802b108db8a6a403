// Multicast, address info, devices and endpoints: rdma_join_multicast(_ex),
// rdma_leave_multicast, rdma_getaddrinfo, rdma_freeaddrinfo,
// rdma_get_devices, rdma_free_devices, rdma_create_ep, rdma_destroy_ep.
#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>

#include "handles.h"

namespace rdmacm::misuse {
namespace {

sockaddr* group(const char* ip) {
  static sockaddr_in g;
  g = sockaddr_in{};
  g.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &g.sin_addr);
  return reinterpret_cast<sockaddr*>(&g);
}

std::string gai(const char* node, const char* service, const rdma_addrinfo* hints) {
  rdma_addrinfo* res = nullptr;
  int r = rdma_getaddrinfo(node, service, hints, &res);
  if (r == 0) rdma_freeaddrinfo(res);
  return r < -1 ? "ret " + std::to_string(r) : ret(r);  // an EAI_* code
}

}  // namespace

void add_other_rows(std::vector<Row>& rows) {
  add_bad_id_rows(rows, "join_multicast", [](State&, rdma_cm_id* id) {
    return ret(rdma_join_multicast(id, group("239.1.1.1"), nullptr)); });
  rows.push_back({"join_multicast(NULL address)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_join_multicast(s.bound(RDMA_PS_UDP), nullptr, nullptr)); }});
  rows.push_back({"join_multicast(family AF_UNIX)", "-1 EINVAL",
                  [](State& s) { sockaddr_storage a{}; a.ss_family = AF_UNIX;
                                 return ret(rdma_join_multicast(s.bound(RDMA_PS_UDP), reinterpret_cast<sockaddr*>(&a), nullptr)); }});
  rows.push_back({"join_multicast(unbound id)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_join_multicast(s.fresh(RDMA_PS_UDP), group("239.1.1.2"), nullptr)); }});
  rows.push_back({"join_multicast(unicast address)", "0",
                  [](State& s) { return ret(rdma_join_multicast(s.bound(RDMA_PS_UDP), group("10.1.1.1"), nullptr)); }});
  add_bad_id_rows(rows, "join_multicast_ex", [](State&, rdma_cm_id* id) {
    rdma_cm_join_mc_attr_ex a{}; a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    a.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER; a.addr = group("239.1.1.3");
    return ret(rdma_join_multicast_ex(id, &a, nullptr)); });
  struct Ex { const char* name; uint32_t mask; uint32_t flags; bool addr; std::string ours; };
  for (const Ex& e : std::vector<Ex>{
           {"NULL attr", 0, 0, false, "-1 EINVAL"},
           {"no address in comp_mask", RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, 0, true, "-1 EINVAL"},
           {"no flags in comp_mask", RDMA_CM_JOIN_MC_ATTR_ADDRESS, 0, true, "-1 EINVAL"},
           {"reserved comp_mask bit", RDMA_CM_JOIN_MC_ATTR_RESERVED, 0, true, "-1 EOPNOTSUPP"},
           {"join flags 3 (reserved)", RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, 3, true, "-1 EINVAL"},
           {"join flags 0x7fffffff", RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, 0x7fffffff, true, "-1 EINVAL"},
           {"address NULL", RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, 0, false, "-1 EINVAL"},
       }) {
    rows.push_back({std::string("join_multicast_ex(") + e.name + ")", e.ours, [e](State& s) {
                      rdma_cm_join_mc_attr_ex a{};
                      a.comp_mask = e.mask; a.join_flags = e.flags; a.addr = e.addr ? group("239.1.1.4") : nullptr;
                      bool null_attr = std::strcmp(e.name, "NULL attr") == 0;
                      return ret(rdma_join_multicast_ex(s.bound(RDMA_PS_UDP), null_attr ? nullptr : &a, nullptr)); },
                    std::strcmp(e.name, "NULL attr") ? "" : "rdma-core dereferences the NULL argument"});
  }
  add_bad_id_rows(rows, "leave_multicast", [](State&, rdma_cm_id* id) {
    return ret(rdma_leave_multicast(id, group("239.1.1.5"))); });
  rows.push_back({"leave_multicast(never joined)", "-1 EADDRNOTAVAIL",
                  [](State& s) { return ret(rdma_leave_multicast(s.bound(RDMA_PS_UDP), group("239.1.1.6"))); }});
  rows.push_back({"leave_multicast(NULL address)", "-1 EINVAL",
                  [](State& s) { return ret(rdma_leave_multicast(s.bound(RDMA_PS_UDP), nullptr)); }});

  // rdma_getaddrinfo: hints that crash rdma-core (lengths without addresses).
  rows.push_back({"getaddrinfo(nothing)", "-1 EINVAL",
                  [](State&) { return gai(nullptr, nullptr, nullptr); }});
  rows.push_back({"getaddrinfo(NULL res)", "-1 EINVAL",
                  [](State&) { return ret(rdma_getaddrinfo("127.0.0.1", nullptr, nullptr, nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"getaddrinfo(unresolvable numeric host)", "ret " + std::to_string(EAI_NONAME),
                  [](State&) { rdma_addrinfo h{}; h.ai_flags = RAI_NUMERICHOST; return gai("not-a-number", nullptr, &h); }});
  rows.push_back({"getaddrinfo(service 'no-such-service')", "ret " + std::to_string(EAI_SERVICE),
                  [](State&) { return gai("127.0.0.1", "no-such-service-xyz", nullptr); }});
  struct H { const char* name; bool src; socklen_t len; bool addr; std::string ours; };
  for (const H& h : std::vector<H>{
           {"src length 16, NULL address", true, 16, false, "-1 EINVAL"},
           {"dst length 16, NULL address", false, 16, false, "-1 EINVAL"},
           {"src length 1 GiB", true, 1u << 30, true, "-1 EINVAL"},
           {"dst length 1 GiB", false, 1u << 30, true, "-1 EINVAL"},
           {"src length 129", true, 129, true, "-1 EINVAL"},
       }) {
    rows.push_back({std::string("getaddrinfo(hints ") + h.name + ")", h.ours, [h](State&) {
                      static sockaddr_in sin{};
                      sin.sin_family = AF_INET;
                      rdma_addrinfo hints{};
                      (h.src ? hints.ai_src_len : hints.ai_dst_len) = h.len;
                      (h.src ? hints.ai_src_addr : hints.ai_dst_addr) = h.addr ? reinterpret_cast<sockaddr*>(&sin) : nullptr;
                      return gai(nullptr, nullptr, &hints); }, "rdma-core copies ai_*_len bytes from ai_*_addr blindly"});
  }
  rows.push_back({"freeaddrinfo(NULL)", "void",
                  [](State&) { rdma_freeaddrinfo(nullptr); return none(); }});
  rows.push_back({"freeaddrinfo(forged)", "void EINVAL",
                  [](State&) { static rdma_addrinfo forged{}; rdma_freeaddrinfo(&forged); return none(); },
                  "ours validates every handle against its live objects"});
  rows.push_back({"freeaddrinfo(twice)", "void EINVAL",
                  [](State&) { rdma_addrinfo* res = nullptr; rdma_getaddrinfo("127.0.0.1", "7471", nullptr, &res);
                               rdma_freeaddrinfo(res); reset_errno(); rdma_freeaddrinfo(res); return none(); },
                  "ours validates every handle against its live objects"});

  rows.push_back({"get_devices(NULL count)", "ptr",
                  [](State&) { ibv_context** l = rdma_get_devices(nullptr); std::string r = ptr(l); rdma_free_devices(l); return r; }});
  rows.push_back({"free_devices(NULL)", "void",
                  [](State&) { rdma_free_devices(nullptr); return none(); }});
  rows.push_back({"free_devices(twice)", "void EINVAL",
                  [](State&) { ibv_context** l = rdma_get_devices(nullptr); rdma_free_devices(l); reset_errno();
                               rdma_free_devices(l); return none(); }, "ours validates every handle against its live objects"});
  rows.push_back({"free_devices(forged)", "void EINVAL",
                  [](State&) { static ibv_context* forged[2] = {}; rdma_free_devices(forged); return none(); },
                  "ours validates every handle against its live objects"});

  rows.push_back({"create_ep(NULL res)", "-1 EINVAL",
                  [](State&) { rdma_cm_id* id; return ret(rdma_create_ep(&id, nullptr, nullptr, nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"create_ep(NULL out)", "-1 EINVAL",
                  [](State&) { rdma_addrinfo* res = nullptr; rdma_addrinfo h{}; h.ai_flags = RAI_PASSIVE;
                               rdma_getaddrinfo(nullptr, "7999", &h, &res); reset_errno();
                               return ret(rdma_create_ep(nullptr, res, nullptr, nullptr)); },
                  "rdma-core dereferences the NULL argument"});
  rows.push_back({"create_ep(port space 99)", "-1 EINVAL",
                  [](State&) { rdma_addrinfo* res = nullptr; rdma_addrinfo h{}; h.ai_flags = RAI_PASSIVE;
                               rdma_getaddrinfo(nullptr, "7999", &h, &res); reset_errno();
                               res->ai_port_space = 99; rdma_cm_id* id;
                               return ret(rdma_create_ep(&id, res, nullptr, nullptr)); }});
  add_bad_id_rows(rows, "destroy_ep", [](State&, rdma_cm_id* id) { rdma_destroy_ep(id); return none(); },
                  "void EINVAL");
}

}  // namespace rdmacm::misuse
