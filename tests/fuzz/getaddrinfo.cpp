// libFuzzer target: rdma_getaddrinfo and rdma_resolve_addrinfo (on a
// synchronous id) with node, service and every hint field from the input,
// each result read through and freed with rdma_freeaddrinfo.
//
// No name service is ever asked: RAI_NUMERICHOST is always set (it becomes
// getaddrinfo's AI_NUMERICHOST) and the service is NULL or a port number,
// which getaddrinfo converts itself (there is no RAI_ flag for
// AI_NUMERICSERV); RAI_SA is refused before any lookup. So a run makes no DNS
// query, reads no services database and sends no packet. (To sort several
// results glibc still reads the local addresses over netlink and connect()s
// a UDP socket to each result, which sends nothing.)
#include <arpa/inet.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fake_transport.h"

namespace {

// NULL, any string, or (mostly) a numeric address that getaddrinfo accepts.
std::optional<std::string> make_node(FuzzedDataProvider& in) {
  int family = AF_INET;
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return std::nullopt;
    case 1:
      return in.ConsumeRandomLengthString(64);
    case 2:
      family = AF_INET6;
      break;
  }
  uint8_t raw[sizeof(in6_addr)] = {};
  in.ConsumeData(raw, sizeof(raw));
  char text[INET6_ADDRSTRLEN];
  if (!inet_ntop(family, raw, text, sizeof(text))) std::abort();
  std::string node = text;
  // A numeric scope (a name would look an interface up: no traffic, but slow).
  if (family == AF_INET6 && in.ConsumeBool())
    node += "%" + std::to_string(in.ConsumeIntegral<uint8_t>());
  return node;
}

// A hint address: absent, or the input's bytes in a heap block exactly as
// long as the length claims (capped at a sockaddr_storage), so that ASan sees
// any read past what the caller handed over.
struct HintAddr {
  std::unique_ptr<uint8_t[]> bytes;
  socklen_t len = 0;

  void fill(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0:  // none
        return;
      case 1:  // NULL with a length: to be refused
        len = in.ConsumeIntegralInRange<socklen_t>(1, UINT32_MAX);
        return;
      case 2:  // any length: past a sockaddr_storage, to be refused
        len = in.ConsumeIntegral<socklen_t>();
        break;
      default:  // one the library may take
        len = in.ConsumeIntegralInRange<socklen_t>(1, sizeof(sockaddr_storage));
        break;
    }
    size_t size = std::min<size_t>(len, sizeof(sockaddr_storage));
    bytes = std::make_unique<uint8_t[]>(size ? size : 1);
    std::vector<uint8_t> data = in.ConsumeBytes<uint8_t>(size);
    std::copy(data.begin(), data.end(), bytes.get());
    if (size >= sizeof(sa_family_t) && in.ConsumeBool()) {
      // Most of the time a family getaddrinfo knows, to get past it.
      static const sa_family_t families[] = {AF_INET, AF_INET6, AF_IB, AF_UNSPEC};
      std::memcpy(bytes.get(), &families[in.ConsumeIntegralInRange(0, 3)],
                  sizeof(sa_family_t));
    }
  }
  sockaddr* addr() const { return reinterpret_cast<sockaddr*>(bytes.get()); }
  bool refused() const { return len && (!bytes || len > sizeof(sockaddr_storage)); }
};

struct Call {
  std::optional<std::string> node, service;
  rdma_addrinfo hints{};
  HintAddr src, dst;

  explicit Call(FuzzedDataProvider& in) {
    static const int families[] = {AF_UNSPEC, AF_INET, AF_INET6, AF_IB};
    static const int qp_types[] = {0, IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
                                   IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV};
    static const int port_spaces[] = {0, RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB,
                                      RDMA_PS_IPOIB};
    hints.ai_flags = in.ConsumeIntegral<int>() | RAI_NUMERICHOST;
    hints.ai_family = in.ConsumeBool() ? in.PickValueInArray(families)
                                       : in.ConsumeIntegral<int>();
    hints.ai_qp_type = in.ConsumeBool() ? in.PickValueInArray(qp_types)
                                        : in.ConsumeIntegral<int>();
    hints.ai_port_space = in.ConsumeBool() ? in.PickValueInArray(port_spaces)
                                           : in.ConsumeIntegral<int>();
    src.fill(in);
    dst.fill(in);
    hints.ai_src_addr = src.addr();
    hints.ai_src_len = src.len;
    hints.ai_dst_addr = dst.addr();
    hints.ai_dst_len = dst.len;
    node = make_node(in);
    if (in.ConsumeBool()) {
      // A port number: anything else (a name, or digits past 65535) glibc
      // looks up in the services database.
      service = std::to_string(in.ConsumeIntegral<uint16_t>());
    }
  }
  const char* node_arg() const { return node ? node->c_str() : nullptr; }
  const char* service_arg() const { return service ? service->c_str() : nullptr; }
  bool must_fail() const { return src.refused() || dst.refused(); }
};

// Reads every byte a result claims to have, so that ASan checks the lengths.
void read_through(const rdma_addrinfo* res) {
  volatile uint8_t sink = 0;
  for (const rdma_addrinfo* r = res; r; r = r->ai_next) {
    auto touch = [&](const void* p, size_t len) {
      if (len && !p) std::abort();  // a length without its data
      for (size_t i = 0; i < len; ++i) sink = sink + static_cast<const uint8_t*>(p)[i];
    };
    touch(r->ai_src_addr, r->ai_src_len);
    touch(r->ai_dst_addr, r->ai_dst_len);
    touch(r->ai_route, r->ai_route_len);
    touch(r->ai_connect, r->ai_connect_len);
    if (r->ai_src_canonname) touch(r->ai_src_canonname, std::strlen(r->ai_src_canonname));
    if (r->ai_dst_canonname) touch(r->ai_dst_canonname, std::strlen(r->ai_dst_canonname));
  }
}

// A refused hint address must be refused with EINVAL, whatever else the call
// holds (the library must not read it, nor let getaddrinfo fail first).
void check_refused(const Call& call, int ret) {
  if (call.must_fail() && !(ret == -1 && errno == EINVAL)) std::abort();
}

void fuzz_getaddrinfo(const Call& call, bool null_res) {
  rdma_addrinfo* res = nullptr;
  errno = 0;
  int ret = rdma_getaddrinfo(call.node_arg(), call.service_arg(), &call.hints,
                             null_res ? nullptr : &res);
  check_refused(call, ret);
  if (null_res && !ret) std::abort();  // nowhere to put a result: an error
  if (ret) return;
  read_through(res);
  rdma_freeaddrinfo(res);
}

// The fake kernel behind the synchronous id (it never reaches the kernel's
// rdma_cm: resolve_addrinfo runs getaddrinfo in the call itself).
rdmacm::testing::FakeTransport* fake;
rdma_cm_id* sync_id;

void fuzz_resolve_addrinfo(const Call& call) {
  errno = 0;
  int ret = rdma_resolve_addrinfo(sync_id, call.node_arg(), call.service_arg(), &call.hints);
  check_refused(call, ret);
  rdma_addrinfo* res = nullptr;
  if (!rdma_query_addrinfo(sync_id, &res)) {
    read_through(res);
    rdma_freeaddrinfo(res);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fake = new rdmacm::testing::FakeTransport;
  if (rdma_create_id(nullptr, &sync_id, nullptr, RDMA_PS_TCP)) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  bool on_id = in.ConsumeBool();
  bool null_res = in.ConsumeBool();
  Call call(in);
  if (on_id)
    fuzz_resolve_addrinfo(call);
  else
    fuzz_getaddrinfo(call, null_res);
  return 0;
}
