// rdma_getaddrinfo / rdma_freeaddrinfo: getaddrinfo(3) translated to RDMA
// terms (QP type, port space, AF_IB), as rdma-core does it. Route data from
// an IB address resolution service (ibacm) is not consulted.
#include <infiniband/ib.h>
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/cm.h"
#include "core/addrinfo.h"
#include "core/registry.h"

namespace rdmacm::core {
namespace {

PointerSet<rdma_addrinfo>& live() {
  static auto* set = new PointerSet<rdma_addrinfo>;
  return *set;
}

addrinfo to_hints(const rdma_addrinfo& rai) {
  addrinfo ai{};
  if (rai.ai_flags & RAI_PASSIVE) ai.ai_flags |= AI_PASSIVE;
  if (rai.ai_flags & RAI_NUMERICHOST) ai.ai_flags |= AI_NUMERICHOST;
  if (rai.ai_family != AF_IB) ai.ai_family = rai.ai_family;
  switch (rai.ai_qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
      ai.ai_socktype = SOCK_STREAM;
      break;
    case IBV_QPT_UD:
      ai.ai_socktype = SOCK_DGRAM;
      break;
  }
  switch (rai.ai_port_space) {
    case RDMA_PS_TCP:
      ai.ai_protocol = IPPROTO_TCP;
      break;
    case RDMA_PS_IPOIB:
    case RDMA_PS_UDP:
      ai.ai_protocol = IPPROTO_UDP;
      break;
    case RDMA_PS_IB:
      if (ai.ai_socktype == SOCK_STREAM) ai.ai_protocol = IPPROTO_TCP;
      else if (ai.ai_socktype == SOCK_DGRAM) ai.ai_protocol = IPPROTO_UDP;
      break;
  }
  return ai;
}

int copy_addr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t len) {
  *dst = static_cast<sockaddr*>(std::malloc(len));
  if (!*dst) return -ENOMEM;
  std::memcpy(*dst, src, len);
  *dst_len = len;
  return 0;
}

uint16_t port_be(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  return 0;
}

// An IPv6 address read as a GID, with the service id of port space and port.
int to_ib(int ps, sockaddr** dst, socklen_t* dst_len, const sockaddr* src) {
  if (src->sa_family != AF_INET6) return -EINVAL;
  auto* in6 = reinterpret_cast<const sockaddr_in6*>(src);
  auto* sib = static_cast<sockaddr_ib*>(std::calloc(1, sizeof(sockaddr_ib)));
  if (!sib) return -ENOMEM;
  sib->sib_family = AF_IB;
  sib->sib_pkey = htobe16(0xFFFF);
  sib->sib_flowinfo = in6->sin6_flowinfo;
  std::memcpy(&sib->sib_addr, &in6->sin6_addr, sizeof(in6->sin6_addr));
  uint16_t port = be16toh(port_be(src));
  sib->sib_sid = htobe64((static_cast<uint64_t>(ps) << 16) + port);
  if (ps) sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
  if (port) sib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
  sib->sib_scope_id = in6->sin6_scope_id;
  *dst = reinterpret_cast<sockaddr*>(sib);
  *dst_len = sizeof(sockaddr_ib);
  return 0;
}

int from_addrinfo(rdma_addrinfo& rai, const rdma_addrinfo& hints, const addrinfo& ai) {
  if (hints.ai_qp_type)
    rai.ai_qp_type = hints.ai_qp_type;
  else if (ai.ai_socktype == SOCK_STREAM)
    rai.ai_qp_type = IBV_QPT_RC;
  else if (ai.ai_socktype == SOCK_DGRAM)
    rai.ai_qp_type = IBV_QPT_UD;

  if (hints.ai_port_space)
    rai.ai_port_space = hints.ai_port_space;
  else if (ai.ai_protocol == IPPROTO_TCP)
    rai.ai_port_space = RDMA_PS_TCP;
  else if (ai.ai_protocol == IPPROTO_UDP)
    rai.ai_port_space = RDMA_PS_UDP;

  bool passive = ai.ai_flags & AI_PASSIVE;
  if (passive) rai.ai_flags = RAI_PASSIVE;
  char** canon = passive ? &rai.ai_src_canonname : &rai.ai_dst_canonname;
  if (ai.ai_canonname && !(*canon = strdup(ai.ai_canonname))) return -ENOMEM;
  sockaddr** addr = passive ? &rai.ai_src_addr : &rai.ai_dst_addr;
  socklen_t* len = passive ? &rai.ai_src_len : &rai.ai_dst_len;
  if ((hints.ai_flags & RAI_FAMILY) && hints.ai_family == AF_IB &&
      (hints.ai_flags & RAI_NUMERICHOST)) {
    rai.ai_family = AF_IB;
    return to_ib(rai.ai_port_space, addr, len, ai.ai_addr);
  }
  rai.ai_family = ai.ai_family;
  return copy_addr(addr, len, ai.ai_addr, ai.ai_addrlen);
}

void release(rdma_addrinfo* rai) {
  while (rai) {
    rdma_addrinfo* next = rai->ai_next;
    std::free(rai->ai_connect);
    std::free(rai->ai_route);
    std::free(rai->ai_src_canonname);
    std::free(rai->ai_dst_canonname);
    std::free(rai->ai_src_addr);
    std::free(rai->ai_dst_addr);
    std::free(rai);
    rai = next;
  }
}

}  // namespace

int getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                rdma_addrinfo** res, int* gai_error) {
  *gai_error = 0;
  if (!node && !service && !hints) return -EINVAL;
  static const rdma_addrinfo no_hints{};
  const rdma_addrinfo& h = hints ? *hints : no_hints;
  auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!rai) return -ENOMEM;

  if (!hint_addrs_valid(h)) {
    release(rai);
    return -EINVAL;
  }
  int err = 0;
  if (node || service) {
    addrinfo ai_hints = to_hints(h);
    addrinfo* ai = nullptr;
    *gai_error = ::getaddrinfo(node, service, hints ? &ai_hints : nullptr, &ai);
    if (*gai_error) {
      int resolver_errno = errno;
      release(rai);
      errno = resolver_errno;
      return 1;  // the resolver's failure: *gai_error says which
    }
    err = from_addrinfo(*rai, h, *ai);
    freeaddrinfo(ai);
  } else {
    rai->ai_flags = h.ai_flags;
    rai->ai_family = h.ai_family;
    rai->ai_qp_type = h.ai_qp_type;
    rai->ai_port_space = h.ai_port_space;
    if (h.ai_dst_len)
      err = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, h.ai_dst_addr, h.ai_dst_len);
  }
  if (!err && !rai->ai_src_len && h.ai_src_len)
    err = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, h.ai_src_addr, h.ai_src_len);
  // rdma-core looks at res only to store a result (and crashes on NULL):
  // its earlier failures, the resolver's among them, are reported as such.
  if (!err && !res) err = -EINVAL;
  if (err) {
    release(rai);
    return err;
  }
  live().add(rai);
  *res = rai;
  return 0;
}

bool hint_addrs_valid(const rdma_addrinfo& hints) {
  // rdma-core copies ai_*_len bytes from ai_*_addr whatever they are, and
  // crashes on a length without an address or one past any sockaddr.
  auto valid = [](const sockaddr* addr, socklen_t len) {
    return !len || (addr && len <= sizeof(sockaddr_storage));
  };
  return valid(hints.ai_src_addr, hints.ai_src_len) &&
         valid(hints.ai_dst_addr, hints.ai_dst_len);
}

int freeaddrinfo(rdma_addrinfo* res) {
  if (!res) return 0;
  if (!live().take(res)) return -EINVAL;
  release(res);
  return 0;
}

}  // namespace rdmacm::core
