// The UDP service of datagram rsockets: the thread that reads every datagram
// rsocket's UDP socket, where a peer that does not know our QPN yet sends
// (protocol.h). It answers with our QPN, makes an address handle to the
// peer's QP (datagram_qp.cpp), and forwards the payload to our own QP, so
// that the application receives every message the same way.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rsocket/datagram.h"
#include "rsocket/service_thread.h"

namespace rdmacm::rsocket {

void DatagramSocket::process_udp() {
  // Room for rdma-core 44's largest (a full slot's payload after our header).
  alignas(8) uint8_t buf[wire::kDsSlotSize + wire::kDsUdpIpv6HeaderLength];
  Addr from{};
  socklen_t from_len = sizeof(from);
  ssize_t n = ::recvfrom(fd_, buf, sizeof(buf), MSG_DONTWAIT, &from.sa, &from_len);
  wire::DsUdpHeader hdr;
  if (n < 0 || !decode_udp_header(buf, static_cast<size_t>(n), from.sa.sa_family, &hdr)) return;
  size_t len = static_cast<size_t>(n) - hdr.length;
  uint32_t qpn = be32toh(hdr.qpn) & 0xFFFFFF;
  Dest* dest = nullptr;
  if (get_dest(&from.sa, from_len, &dest)) return;
  bool data = hdr.op == static_cast<uint8_t>(wire::Op::data);
  if (data) {
    // Our QPN to the sender, whose own service then makes its AH to us.
    LockGuard lock(send_mutex_);
    send_udp(dest, nullptr, 0, 0, wire::Op::ctrl);
  }
  bool stale;
  {
    LockGuard lock(send_mutex_);
    stale = !dest->ah || dest->qpn != qpn;
  }
  if (stale) resolve_ah(dest, qpn);
  if (!data) return;
  LockGuard lock(send_mutex_);
  Qp* qp = dest->qp;
  wire::DsHeader from_hdr = encode_header(dest->addr);
  len = std::min<size_t>(len, wire::kDsSlotSize - from_hdr.length);
  if (qp->self->ah) send_ud(qp->self, from_hdr, buf + hdr.length, len, 0);
}

namespace {

// Never destroyed: its thread outlives static destruction. A datagram lost
// to an out-of-memory is lost as UDP's may be.
auto& udp_service() {
  static auto* service = new ServiceThread<DatagramSocket>([](DatagramSocket* s) { s->process_udp(); });
  return *service;
}

}  // namespace

int watch_udp(DatagramSocket* s) { return udp_service().watch(s); }
void unwatch_udp(DatagramSocket* s) { udp_service().unwatch(s); }

}  // namespace rdmacm::rsocket
