// Datagram rsockets' destinations: one per peer address a socket sends to
// or hears from, kept in a table of bounded size, and the rule that says
// which of the peer's QPs a destination sends to (a peer is not trusted:
// anyone can send a UDP datagram naming any source and any QPN, and any UD
// QP on the fabric can send a message whose header names any address).
//
// The rule (PeerBinding), ours against rdma-core 44's:
// - First contact is as trusting as UDP: a destination with no address
//   handle takes the QPN of the first claim (a DsUdpHeader from its address)
//   once the address resolves, or of a UD message from its host (the GRH's
//   source GID is the address's own) if that comes first.
//   rdma-core 44: the same for a claim; it never learns from a UD message.
// - A bound destination is not rebound by a bare claim. A claim naming
//   another QPN is kept as a candidate; while one is pending, sends to the
//   destination go over UDP to its address, which only the address's owner
//   receives (its UDP service forwards them). The candidate becomes the
//   binding when a UD message from the candidate QPN arrives from the
//   address's host: the peer re-resolved us and sends from its new QP. A UD
//   message from the bound QPN instead proves the old binding alive and the
//   candidate is dropped.
//   rdma-core 44: any datagram naming the address and another QPN rebinds at
//   once (a spoofed one redirects every later send).
// What this does not stop: a process on the peer's own host (its GID is the
// address's), or a sender that forges RoCE packets as well as UDP ones.
//
// The table (DestTable): at most kMaxDests peers; a new one past that evicts
// the least recently used peer its owner lets go (one no sender holds, no
// resolution is using, none of whose sends is still in flight), one with no
// address handle first (made-up sources get none: a working peer outlives a
// flood of them), else it is refused. An evicted peer that speaks again is
// a new one: first contact over UDP again. A QP's own destination (where the
// UDP service forwards to) is not counted and never evicted.
// rdma-core 44: unbounded (a tsearch tree that only grows).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include "rsocket/datagram_header.h"

namespace rdmacm::rsocket {

struct DatagramQp;  // datagram.h

// Which QP of the peer's a destination sends to (see above).
class PeerBinding {
 public:
  enum class Claim {
    resolve,    // unbound: resolve the address (the claim's QPN is the one to bind)
    none,       // the claim names the bound QPN
    candidate,  // another QPN: kept as the candidate, not bound
  };
  enum class Heard {
    none,       // nothing changes
    learn,      // unbound: bind to the sender (an AH from the message)
    rebound,    // the candidate proved itself and is bound now
    confirmed,  // the bound QPN is alive: the candidate was dropped
  };

  bool bound() const { return bound_; }
  uint32_t qpn() const { return qpn_; }
  // A candidate is pending: sends go over UDP until it is settled.
  bool unsettled() const { return has_candidate_; }

  // A DsUdpHeader from the destination's address naming qpn.
  Claim on_claim(uint32_t qpn);
  // A UD message naming the destination's address, from the peer's QP
  // src_qp; from_host: its GRH names the address's own GID.
  Heard on_heard(uint32_t src_qp, bool from_host);
  // An address handle was made (resolution, learn): bind to qpn.
  void bind(uint32_t qpn);

 private:
  uint32_t qpn_ = 0;
  uint32_t candidate_ = 0;
  bool bound_ = false;
  bool has_candidate_ = false;
};

struct DatagramDest {
  SockAddr addr{};
  DatagramQp* qp = nullptr;  // ours, that sends to it
  ibv_ah* ah = nullptr;      // none yet: send over UDP (the peer's service answers)
  PeerBinding binding;       // the peer's QPN: binding.qpn()
  rdma_cm_id* resolving = nullptr;  // an address resolution in flight
  uint32_t resolving_qpn = 0;       // the claim's QPN, bound when it ends
  uint64_t last_post = 0;  // the socket's count of UD sends at its last one
  bool self = false;       // a QP's own (not counted, never evicted)
  DatagramDest* newer = nullptr;  // the LRU list (peers only)
  DatagramDest* older = nullptr;

  // Sends go over UDP: no AH, or a candidate to settle.
  bool over_udp() const { return !ah || binding.unsettled(); }
};

class DestTable {
 public:
  static constexpr size_t kMaxDests = 1024;
  using CanEvict = std::function<bool(const DatagramDest&)>;

  explicit DestTable(size_t max_peers = kMaxDests) : max_(max_peers) {}
  DestTable(const DestTable&) = delete;
  DestTable& operator=(const DestTable&) = delete;

  // The destination for a, now the most recently used; null if none.
  DatagramDest* find(const SockAddr& a);
  // A new peer for a (not in the table). When max_peers are held, the least
  // recently used one without an AH that can_evict allows leaves first (if
  // none, the least recently used that it allows), into *evicted for
  // the caller to let go of (its AH); null, and nothing changed, if none may.
  DatagramDest* add(const SockAddr& a, DatagramQp* qp, const CanEvict& can_evict,
                    std::unique_ptr<DatagramDest>* evicted);
  // A QP's own destination: not counted, never evicted (a peer already at a
  // becomes it).
  DatagramDest* add_self(const SockAddr& a, DatagramQp* qp);

  size_t peers() const { return peers_; }
  size_t evictions() const { return evictions_; }
  size_t max_peers() const { return max_; }

  template <typename F>
  void for_each(F&& f) {
    for (auto& [addr, dest] : map_) f(*dest);
  }

 private:
  struct AddrLess {
    bool operator()(const SockAddr& a, const SockAddr& b) const {
      return std::memcmp(&a, &b, sizeof(SockAddr)) < 0;
    }
  };
  void link_newest(DatagramDest* d);
  void unlink(DatagramDest* d);

  std::map<SockAddr, std::unique_ptr<DatagramDest>, AddrLess> map_;
  DatagramDest* newest_ = nullptr;
  DatagramDest* oldest_ = nullptr;
  size_t peers_ = 0;
  size_t evictions_ = 0;
  const size_t max_;
};

}  // namespace rdmacm::rsocket
