// The rsocket wire format, as rdma-core 44's rsockets speak it: whatever crosses
// the network or is written into the peer's memory is declared here, so that
// our rsockets and rdma-core 44's talk to each other in both directions.
//
// Stream sockets (RC QPs):
// - Connection private data (ConnData) carries each side's receive buffer
//   and the "target SGL" (where the peer writes buffer updates), with the
//   initial credits.
// - Every message is an RDMA write with immediate data (ImmData): data lands
//   in the peer's receive buffer; credit updates (SGL) land in the peer's
//   target SGL; control messages (CTRL) carry no payload.
// - Multi-byte fields of ConnData are big-endian; an Sge written into the
//   peer's target SGL is in the writer's byte order, flagged in ConnData
//   (kConnFlagNet) so that a peer of the other order swaps it.
#pragma once

#include <byteswap.h>
#include <endian.h>

#include <cstddef>
#include <cstdint>

namespace rdmacm::rsocket::wire {

// Immediate data: bits 31..29 the operation, bits 28..0 its argument (bytes
// written for DATA, the credit sequence number for SGL, a Ctrl code for
// CTRL, the iomap index for IOMAP_SGL).
enum class Op : uint32_t {
  data = 0,
  write = 2,  // local bookkeeping only: direct placement, never on the wire
  sgl = 4,
  iomap_sgl = 6,
  ctrl = 7,
};
constexpr uint32_t kImmDataMask = 0x1FFFFFFF;
constexpr uint32_t imm(Op op, uint32_t data) {
  return static_cast<uint32_t>(op) << 29 | (data & kImmDataMask);
}
constexpr Op imm_op(uint32_t imm) { return static_cast<Op>(imm >> 29); }
constexpr uint32_t imm_data(uint32_t imm) { return imm & kImmDataMask; }

enum class Ctrl : uint32_t { disconnect = 0, keepalive = 1, shutdown = 2 };

// A remote buffer: what an RDMA write needs.
struct Sge {
  uint64_t addr;
  uint32_t key;
  uint32_t length;
};
static_assert(sizeof(Sge) == 16 && offsetof(Sge, key) == 8 && offsetof(Sge, length) == 12);

// One entry of the iomap table that follows the target SGL in memory.
struct IomapEntry {
  uint64_t offset;
  Sge sge;
};
static_assert(sizeof(IomapEntry) == 24);

// What a peer of the other byte order finds in its memory (kConnFlagNet).
inline Sge byteswapped(const Sge& s) {
  return {bswap_64(s.addr), bswap_32(s.key), bswap_32(s.length)};
}
inline IomapEntry byteswapped(const IomapEntry& e) {
  return {bswap_64(e.offset), byteswapped(e.sge)};
}

constexpr uint8_t kVersion = 1;
constexpr uint8_t kConnFlagNet = 1 << 0;    // the sender is big-endian
constexpr uint8_t kConnFlagIomap = 1 << 1;  // an iomap table follows the target SGL
constexpr uint32_t kTargetSglSize = 2;      // entries of the target SGL

// On AF_IB ids the private data starts with rdma-core 44's IB CM header
// (cma_version, ip_version, port, 16-byte source and destination addresses).
constexpr size_t kIbConnectHeaderSize = 36;

// Connection request and response private data (after that header on AF_IB).
struct ConnData {
  uint8_t version;
  uint8_t flags;
  uint16_t credits;  // big-endian: receives the peer may consume
  uint8_t reserved[3];
  uint8_t target_iomap_size;  // scaled (scale_of)
  Sge target_sgl;             // all fields big-endian
  Sge data_buf;               // all fields big-endian
};
static_assert(sizeof(ConnData) == 40);
static_assert(offsetof(ConnData, credits) == 2 && offsetof(ConnData, target_iomap_size) == 7 &&
              offsetof(ConnData, target_sgl) == 8 && offsetof(ConnData, data_buf) == 24);

// Sizes in ConnData fit 8 bits: small values as they are, larger ones as a
// mantissa with the top bit set.
constexpr int scale_of(int value, int bits) {
  return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}
constexpr int value_of(int scale, int bits) {
  return scale <= (1 << (bits - 1)) ? scale : (scale & ~(1 << (bits - 1))) << bits;
}

inline Sge sge_to_wire(const Sge& s) { return {htobe64(s.addr), htobe32(s.key), htobe32(s.length)}; }
inline Sge sge_from_wire(const Sge& s) { return {be64toh(s.addr), be32toh(s.key), be32toh(s.length)}; }

// The connection data a side sends: its receive credits, the iomap entries it
// offers, where the peer writes buffer updates, and the first half of its
// receive buffer.
inline ConnData encode_conn_data(uint16_t credits, uint16_t iomap_size, const Sge& target_sgl,
                                 const Sge& data_buf) {
  ConnData c{};
  c.version = kVersion;
  c.flags = kConnFlagIomap | (__BYTE_ORDER == __BIG_ENDIAN ? kConnFlagNet : 0);
  c.credits = htobe16(credits);
  c.target_iomap_size = static_cast<uint8_t>(scale_of(iomap_size, 8));
  c.target_sgl = sge_to_wire(target_sgl);
  c.data_buf = sge_to_wire(data_buf);
  return c;
}

// What a side learns from the peer's connection data.
struct PeerConnData {
  uint16_t credits;
  Sge target_sgl;    // where to write buffer updates (length: entries)
  Sge iomap;         // the peer's iomap table (length: entries; 0 if none)
  Sge data_buf;      // the first buffer to write data into
  bool swap_sgl;     // the peer's byte order differs from ours
};
inline PeerConnData decode_conn_data(const ConnData& c) {
  PeerConnData p{};
  p.credits = be16toh(c.credits);
  p.target_sgl = sge_from_wire(c.target_sgl);
  p.data_buf = sge_from_wire(c.data_buf);
  p.swap_sgl = static_cast<bool>(c.flags & kConnFlagNet) != (__BYTE_ORDER == __BIG_ENDIAN);
  if (c.flags & kConnFlagIomap) {
    p.iomap.addr = p.target_sgl.addr + sizeof(Sge) * p.target_sgl.length;
    p.iomap.length = static_cast<uint32_t>(value_of(c.target_iomap_size, 8));
    p.iomap.key = p.target_sgl.key;
  }
  return p;
}

// Protocol constants both sides rely on.
constexpr uint32_t kCtrlMessages = 4;      // control messages in flight (power of 2)
constexpr uint32_t kMaxCtrlMessage = sizeof(Sge);
// iWARP (no immediate data): a message is a SEND of its 32-bit immediate
// value, in the sender's byte order as rdma-core 44 sends it.
constexpr uint32_t kMsgSize = sizeof(uint32_t);
constexpr uint32_t kSendLowWater = 2048;   // bytes of send buffer that make a socket writable
constexpr uint32_t kFirstTransfer = 2048;  // a send's first chunk; doubles up to kMaxTransfer
constexpr uint32_t kMaxTransfer = 65536;

// Datagram sockets (UD QPs, datagram.cpp):
// - Every UD message starts with a DsHeader naming the sender's address (the
//   address its QP is bound to), which rrecvfrom hands out as the source.
// - A destination whose QP number is not known yet is sent to over the UDP
//   socket the rsocket owns, with a DsUdpHeader (op data: the payload follows)
//   naming the sender's QPN; the receiving side's service thread answers with
//   a DsUdpHeader of op ctrl (its own QPN), resolves an address handle to the
//   sender, and forwards the payload to its own QP. From then on both sides
//   send over UD.
// - Multi-byte fields are big-endian (addresses and ports as in sockaddr).
constexpr uint32_t kDsUdpTag = 0x55555555;  // DsUdpHeader::tag, big-endian on the wire
constexpr uint32_t kUdpQkey = 0x01234567;   // RDMA_UDP_QKEY: the qkey of every rsocket UD QP

struct DsHeader {
  uint8_t version;  // 4 or 6
  uint8_t length;   // kDsIpv4HeaderLength or kDsIpv6HeaderLength: where the payload starts
  uint16_t port;    // big-endian
  union {
    uint32_t ipv4;  // big-endian
    struct {
      uint32_t flowinfo;
      uint8_t addr[16];
    } ipv6;
  } addr;
};
constexpr uint8_t kDsIpv4HeaderLength = 8;
constexpr uint8_t kDsIpv6HeaderLength = 24;
static_assert(sizeof(DsHeader) == kDsIpv6HeaderLength && offsetof(DsHeader, length) == 1 &&
              offsetof(DsHeader, port) == 2 && offsetof(DsHeader, addr) == 4 &&
              offsetof(DsHeader, addr.ipv6.addr) == 8);

struct DsUdpHeader {
  uint32_t tag;  // kDsUdpTag, big-endian
  uint8_t version;  // 4 or 6: the family of addr (and of the UDP datagram)
  uint8_t op;       // Op::data (payload follows) or Op::ctrl (the answer, no payload)
  uint8_t length;   // kDsUdpIpv4HeaderLength or kDsUdpIpv6HeaderLength
  uint8_t reserved;
  uint32_t qpn;  // big-endian; the sender's QP number in the low 24 bits
  union {
    uint32_t ipv4;
    uint8_t ipv6[16];
  } addr;  // the sender's QP's address
};
constexpr uint8_t kDsUdpIpv4HeaderLength = 16;
constexpr uint8_t kDsUdpIpv6HeaderLength = 28;
static_assert(sizeof(DsUdpHeader) == kDsUdpIpv6HeaderLength && offsetof(DsUdpHeader, version) == 4 &&
              offsetof(DsUdpHeader, op) == 5 && offsetof(DsUdpHeader, length) == 6 &&
              offsetof(DsUdpHeader, qpn) == 8 && offsetof(DsUdpHeader, addr) == 12);

// A datagram's room: each send and receive slot is kSendLowWater bytes, the
// DsHeader included (a UD receive also takes the 40-byte GRH, in a slot of
// its own).
constexpr uint32_t kDsSlotSize = kSendLowWater;

}  // namespace rdmacm::rsocket::wire
