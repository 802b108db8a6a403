// The UDP service of datagram rsockets: the thread that reads every datagram
// rsocket's UDP socket, where a peer that does not know our QPN yet sends
// (protocol.h). It answers with our QPN, takes the datagram's QPN as a claim
// (datagram_resolve.cpp: the binding rule, and an address resolution it may
// start, whose events come on a channel this thread also watches), and
// forwards the payload to our own QP, so that the application receives
// every message the same way. A datagram with the protocol's tag that is not
// well-formed, or from a source the destination table has no room for, is
// dropped as UDP drops; one without the tag is a kernel UDP sender's, queued
// for the application (datagram_plain.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rsocket/datagram.h"
#include "rsocket/service_thread.h"

namespace rdmacm::rsocket {
namespace {

// A test hook, not the public API (tests/rxe/rsocket_dgram_flood.sh): with
// RDMACM_TEST_DGRAM_STATS naming a file, the service writes a socket's
// destination table's figures there, at most once a second.
void report(DatagramSocket* s) {
  static const char* path = std::getenv("RDMACM_TEST_DGRAM_STATS");
  static std::chrono::steady_clock::time_point last;  // the service thread's only
  if (!path) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::seconds(1)) return;
  last = now;
  DatagramSocket::Stats st = s->stats();
  char line[160];
  int n = std::snprintf(line, sizeof(line), "peers %zu max %zu evictions %zu resolving %d\n",
                        st.peers, st.max_peers, st.evictions, st.resolving);
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (::write(fd, line, static_cast<size_t>(n)) < 0) {
    // A test's file: nothing to do.
  }
  ::close(fd);
}

}  // namespace

DatagramSocket::Stats DatagramSocket::stats() {
  LockGuard send(send_mutex_);
  LockGuard map(map_mutex_);
  return {dests_.peers(), dests_.max_peers(), dests_.evictions(), resolving_};
}

void DatagramSocket::process_udp() {
  // Room for the largest UDP datagram: a plain one is the application's
  // whole (the protocol's are never past a slot's payload and our header).
  // The one service thread's.
  static thread_local uint8_t buf[65536];
  Addr from{};
  socklen_t from_len = sizeof(from);
  ssize_t n;
  {
    LockGuard fd(fd_mutex_);
    n = ::recvfrom(fd_, buf, sizeof(buf), MSG_DONTWAIT, &from.sa, &from_len);
  }
  if (n < 0 || from_len < sockaddr_len(from.sa.sa_family)) return;
  Addr key;
  if (to_key(&from.sa, from_len, &key)) return;
  // No tag: a kernel UDP sender's, the application's (datagram_plain.cpp).
  uint32_t tag;
  if (n < static_cast<ssize_t>(sizeof(tag)) ||
      (std::memcpy(&tag, buf, sizeof(tag)), tag != htobe32(wire::kDsUdpTag))) {
    queue_plain(key, from_len, buf, static_cast<size_t>(n));
    return;
  }
  forget_plain_peer(key);
  wire::DsUdpHeader hdr;
  if (!decode_udp_header(buf, static_cast<size_t>(n), from.sa.sa_family, &hdr)) return;
  uint32_t qpn = be32toh(hdr.qpn) & 0xFFFFFF;
  bool data = hdr.op == static_cast<uint8_t>(wire::Op::data);
  // QPs 0 and 1 are a port's special QPs, never an rsocket's; rdma-core
  // sends no op but these two.
  if (qpn <= 1 || (!data && hdr.op != static_cast<uint8_t>(wire::Op::ctrl))) return;
  size_t len = static_cast<size_t>(n) - hdr.length;
  forward_udp(from, from_len, qpn, data, buf + hdr.length, len);
  report(this);
}

void DatagramSocket::forward_udp(const Addr& from, socklen_t from_len, uint32_t qpn, bool data,
                                 const uint8_t* payload, size_t len) {
  LockGuard lock(send_mutex_);
  Dest* dest = nullptr;
  if (get_dest(&from.sa, from_len, &dest)) return;
  if (dest->self) return;  // our own address: we never send ourselves UDP
  // Our QPN to the sender, whose own service then makes its AH to us (as
  // rdma-core 44; no larger than what came, and never waiting).
  if (data) send_udp(dest, nullptr, 0, MSG_DONTWAIT, wire::Op::ctrl);
  claim(dest, qpn);
  if (data) {
    Qp* qp = dest->qp;
    wire::DsHeader from_hdr = encode_header(dest->addr);
    // More than one UD message from our QP holds (a peer that does not
    // check its port's MTU, as rdma-core 44): dropped, as the device would
    // drop it without a word. No room in the send queue: dropped, as a full
    // UDP socket drops.
    if (len + from_hdr.length > qp->max_msg) return;
    if (qp->self && qp->self->ah) send_ud(qp->self, from_hdr, payload, len, MSG_DONTWAIT);
  }
}

namespace {

// Never destroyed: its thread outlives static destruction. A datagram lost
// to an out-of-memory is lost as UDP's may be.
auto& udp_service() {
  static auto* service =
      new ServiceThread<DatagramWatch>([](DatagramWatch* w) { (w->socket->*w->ready)(); });
  return *service;
}

}  // namespace

int watch_udp(DatagramWatch* w) { return udp_service().watch(w); }
void unwatch_udp(DatagramWatch* w) { udp_service().unwatch(w); }

}  // namespace rdmacm::rsocket
