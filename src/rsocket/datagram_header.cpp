#include "rsocket/datagram_header.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdmacm::rsocket {

socklen_t sockaddr_len(sa_family_t family) {
  return family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int to_key(const sockaddr* addr, socklen_t len, SockAddr* key) {
  if (!addr) return -EDESTADDRREQ;
  if (len < sizeof(sa_family_t)) return -EINVAL;
  *key = {};
  if (addr->sa_family == AF_INET) {
    if (len < sizeof(sockaddr_in)) return -EINVAL;
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    key->sin.sin_family = AF_INET;
    key->sin.sin_port = in->sin_port;
    key->sin.sin_addr = in->sin_addr;
    return 0;
  }
  if (addr->sa_family == AF_INET6) {
    if (len < sizeof(sockaddr_in6)) return -EINVAL;
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    key->sin6.sin6_family = AF_INET6;
    key->sin6.sin6_port = in6->sin6_port;
    key->sin6.sin6_flowinfo = in6->sin6_flowinfo;
    key->sin6.sin6_addr = in6->sin6_addr;
    key->sin6.sin6_scope_id = in6->sin6_scope_id;
    return 0;
  }
  return -EAFNOSUPPORT;
}

wire::DsHeader encode_header(const SockAddr& a) {
  wire::DsHeader hdr{};
  if (a.sa.sa_family == AF_INET) {
    hdr.version = 4;
    hdr.length = wire::kDsIpv4HeaderLength;
    hdr.port = a.sin.sin_port;
    hdr.addr.ipv4 = a.sin.sin_addr.s_addr;
  } else {
    hdr.version = 6;
    hdr.length = wire::kDsIpv6HeaderLength;
    hdr.port = a.sin6.sin6_port;
    hdr.addr.ipv6.flowinfo = a.sin6.sin6_flowinfo;
    std::memcpy(hdr.addr.ipv6.addr, &a.sin6.sin6_addr, 16);
  }
  return hdr;
}

SockAddr decode_header(const wire::DsHeader& hdr) {
  SockAddr a{};
  if (hdr.version == 4) {
    a.sin.sin_family = AF_INET;
    a.sin.sin_port = hdr.port;
    a.sin.sin_addr.s_addr = hdr.addr.ipv4;
  } else {
    a.sin6.sin6_family = AF_INET6;
    a.sin6.sin6_port = hdr.port;
    a.sin6.sin6_flowinfo = hdr.addr.ipv6.flowinfo;
    std::memcpy(&a.sin6.sin6_addr, hdr.addr.ipv6.addr, 16);
  }
  return a;
}

bool valid_header(const uint8_t* msg, uint32_t len) {
  if (len < wire::kDsIpv4HeaderLength) return false;
  uint8_t version = msg[offsetof(wire::DsHeader, version)];
  uint8_t length = msg[offsetof(wire::DsHeader, length)];
  return ((version == 4 && length == wire::kDsIpv4HeaderLength) ||
          (version == 6 && length == wire::kDsIpv6HeaderLength)) &&
         len >= length;
}

wire::DsUdpHeader encode_udp_header(const wire::DsHeader& from, wire::Op op, uint32_t qpn) {
  wire::DsUdpHeader hdr{};
  hdr.tag = htobe32(wire::kDsUdpTag);
  hdr.version = from.version;
  hdr.op = static_cast<uint8_t>(op);
  hdr.qpn = htobe32(qpn & 0xFFFFFF);
  if (from.version == 4) {
    hdr.length = wire::kDsUdpIpv4HeaderLength;
    hdr.addr.ipv4 = from.addr.ipv4;
  } else {
    hdr.length = wire::kDsUdpIpv6HeaderLength;
    std::memcpy(hdr.addr.ipv6, from.addr.ipv6.addr, 16);
  }
  return hdr;
}

bool decode_udp_header(const uint8_t* buf, size_t n, sa_family_t family, wire::DsUdpHeader* out) {
  if (n < wire::kDsUdpIpv4HeaderLength) return false;
  *out = {};
  std::memcpy(out, buf, std::min(n, sizeof(*out)));
  bool valid = out->tag == htobe32(wire::kDsUdpTag) &&
               ((out->version == 4 && family == AF_INET &&
                 out->length == wire::kDsUdpIpv4HeaderLength) ||
                (out->version == 6 && family == AF_INET6 &&
                 out->length == wire::kDsUdpIpv6HeaderLength));
  return valid && n >= out->length;
}

}  // namespace rdmacm::rsocket
