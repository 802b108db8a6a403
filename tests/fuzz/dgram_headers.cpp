// libFuzzer target: what a datagram rsocket reads from a peer before it
// trusts it, the header decoders of datagram_header.cpp, on arbitrary bytes:
// - a UD receive's completion (its byte_len, GRH included, as the device
//   reports it, at most a slot and its GRH) and the message in the slot:
//   valid_header, then, as the receive path does (DatagramSocket::reap and
//   recv_from), decode_header and the payload's length;
// - a UDP datagram (any length, from an address of any family) as the UDP
//   service reads it: decode_udp_header and the payload's length;
// - an application's address: to_key, and a key's headers encoded and
//   decoded again (the same address and QPN come back).
// Every buffer is a heap block exactly as long as what the device or the
// kernel wrote, so a read past it is an ASan report. A finding besides:
// a header accepted whose payload would start past the message, or a round
// trip that changes the address.
#include <fuzzer/FuzzedDataProvider.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "rsocket/datagram_header.h"

namespace {

namespace wire = rdmacm::rsocket::wire;
using rdmacm::rsocket::SockAddr;

[[noreturn]] void failed(const char* what, int line) {
  std::fprintf(stderr, "dgram_headers.cpp:%d: %s failed\n", line, what);
  std::abort();
}
#define require(ok) ((ok) ? (void)0 : failed(#ok, __LINE__))

// bytes as a heap block of exactly their length.
std::unique_ptr<uint8_t[]> exact(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> p(new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(p.get(), bytes.data(), bytes.size());
  return p;
}

void ud_message(FuzzedDataProvider& in) {
  // The device writes at most the slot after the GRH's own buffer.
  uint32_t byte_len = in.ConsumeBool() ? in.ConsumeIntegral<uint32_t>()
                                       : in.ConsumeIntegralInRange<uint32_t>(0, 80);
  if (byte_len > sizeof(ibv_grh) + wire::kDsSlotSize) byte_len %= sizeof(ibv_grh) + wire::kDsSlotSize + 1;
  if (byte_len < sizeof(ibv_grh)) return;  // reap drops it before looking
  uint32_t len = byte_len - static_cast<uint32_t>(sizeof(ibv_grh));
  std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(len);
  bytes.resize(len);
  auto msg = exact(bytes);
  if (!rdmacm::rsocket::valid_header(msg.get(), len)) return;
  // recv_from: the header, the source it names and the payload after it.
  wire::DsHeader hdr{};
  std::memcpy(&hdr, msg.get(), std::min<size_t>(len, sizeof(hdr)));
  require(hdr.length <= len);
  require(hdr.version == 4 ? hdr.length == wire::kDsIpv4HeaderLength
                           : hdr.version == 6 && hdr.length == wire::kDsIpv6HeaderLength);
  SockAddr from = rdmacm::rsocket::decode_header(hdr);
  require(from.sa.sa_family == (hdr.version == 4 ? AF_INET : AF_INET6));
  require(rdmacm::rsocket::sockaddr_len(from.sa.sa_family) <= sizeof(SockAddr));
}

void udp_datagram(FuzzedDataProvider& in) {
  static const sa_family_t kFamilies[] = {AF_INET, AF_INET6, AF_UNSPEC, AF_IB};
  sa_family_t family = in.PickValueInArray(kFamilies);
  size_t n = in.ConsumeIntegralInRange<size_t>(0, wire::kDsSlotSize + wire::kDsUdpIpv6HeaderLength);
  std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(n);
  auto buf = exact(bytes);
  wire::DsUdpHeader hdr;
  if (!rdmacm::rsocket::decode_udp_header(buf.get(), bytes.size(), family, &hdr)) return;
  require(hdr.tag == htobe32(wire::kDsUdpTag));
  require(hdr.length <= bytes.size());
  require(family == (hdr.version == 4 ? AF_INET : AF_INET6));
  require(hdr.length == (hdr.version == 4 ? wire::kDsUdpIpv4HeaderLength
                                          : wire::kDsUdpIpv6HeaderLength));
}

void address(FuzzedDataProvider& in) {
  socklen_t len = in.ConsumeIntegralInRange<socklen_t>(0, 40);
  std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(len);
  if (in.ConsumeBool() && bytes.size() >= 2) {
    sa_family_t f = in.ConsumeBool() ? AF_INET : AF_INET6;
    std::memcpy(bytes.data(), &f, sizeof(f));
  }
  auto addr = exact(bytes);
  SockAddr key;
  int err = rdmacm::rsocket::to_key(bytes.empty() && in.ConsumeBool()
                                        ? nullptr
                                        : reinterpret_cast<const sockaddr*>(addr.get()),
                                    static_cast<socklen_t>(bytes.size()), &key);
  if (err) {
    require(err == -EDESTADDRREQ || err == -EINVAL || err == -EAFNOSUPPORT);
    return;
  }
  require(bytes.size() >= rdmacm::rsocket::sockaddr_len(key.sa.sa_family));
  // What our messages from this address carry, read back as a peer reads it.
  wire::DsHeader hdr = rdmacm::rsocket::encode_header(key);
  require(rdmacm::rsocket::valid_header(reinterpret_cast<const uint8_t*>(&hdr), hdr.length));
  SockAddr back = rdmacm::rsocket::decode_header(hdr);
  require(back.sa.sa_family == key.sa.sa_family);
  if (key.sa.sa_family == AF_INET) {
    require(back.sin.sin_port == key.sin.sin_port &&
            back.sin.sin_addr.s_addr == key.sin.sin_addr.s_addr);
  } else {
    require(back.sin6.sin6_port == key.sin6.sin6_port &&
            back.sin6.sin6_flowinfo == key.sin6.sin6_flowinfo &&
            !std::memcmp(&back.sin6.sin6_addr, &key.sin6.sin6_addr, 16));
  }
  uint32_t qpn = in.ConsumeIntegral<uint32_t>();
  wire::Op op = in.ConsumeBool() ? wire::Op::data : wire::Op::ctrl;
  wire::DsUdpHeader udp = rdmacm::rsocket::encode_udp_header(hdr, op, qpn);
  wire::DsUdpHeader udp_back;
  require(rdmacm::rsocket::decode_udp_header(reinterpret_cast<const uint8_t*>(&udp), udp.length,
                                            key.sa.sa_family, &udp_back));
  require(udp_back.op == static_cast<uint8_t>(op) &&
          (be32toh(udp_back.qpn) & 0xFFFFFF) == (qpn & 0xFFFFFF));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  while (in.remaining_bytes()) {
    switch (in.ConsumeIntegralInRange(0, 2)) {
      case 0:
        ud_message(in);
        break;
      case 1:
        udp_datagram(in);
        break;
      case 2:
        address(in);
        break;
    }
  }
  return 0;
}
