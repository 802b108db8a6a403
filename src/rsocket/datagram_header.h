// Datagram rsockets' addresses and the headers that carry them (the wire
// format is protocol.h's DsHeader and DsUdpHeader), in one place: what a UD
// message or a UDP datagram from a peer holds is checked here before use.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "rsocket/protocol.h"

namespace rdmacm::rsocket {

// An address as a map key: family, port, address (and v6 scope), the rest
// zero, so that padding an application left unset does not matter.
union SockAddr {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};

socklen_t sockaddr_len(sa_family_t family);

// An application's address, checked (rdma-core 44 copies addrlen bytes into
// a 28-byte union and reads a family it never checked) and made a key.
// 0, -EDESTADDRREQ (none), -EINVAL (short), -EAFNOSUPPORT.
int to_key(const sockaddr* addr, socklen_t len, SockAddr* key);

// The DsHeader our messages from the address a start with.
wire::DsHeader encode_header(const SockAddr& a);
// A received message's header (checked by valid_header) as the source
// address it names.
SockAddr decode_header(const wire::DsHeader& hdr);
// rdma-core 44's ds_valid_recv: a message of len bytes (GRH not counted)
// that starts with a well-formed DsHeader.
bool valid_header(const uint8_t* msg, uint32_t len);

// The DsUdpHeader of a datagram over UDP from a QP whose messages start
// with from (its address), numbered qpn.
wire::DsUdpHeader encode_udp_header(const wire::DsHeader& from, wire::Op op, uint32_t qpn);
// A UDP datagram of n bytes from an address of family: its header, if
// well-formed (tag, version matching the family, length); the payload
// starts at out->length.
bool decode_udp_header(const uint8_t* buf, size_t n, sa_family_t family, wire::DsUdpHeader* out);

}  // namespace rdmacm::rsocket
