#include "rsocket/datagram_dests.h"

namespace rdmacm::rsocket {

PeerBinding::Claim PeerBinding::on_claim(uint32_t qpn) {
  if (!bound_) return Claim::resolve;
  if (qpn == qpn_) return Claim::none;
  candidate_ = qpn;  // the latest claim's
  has_candidate_ = true;
  return Claim::candidate;
}

PeerBinding::Heard PeerBinding::on_heard(uint32_t src_qp, bool from_host) {
  if (!from_host) return Heard::none;
  if (!bound_) return Heard::learn;
  if (!has_candidate_) return Heard::none;  // another QP on the host, unclaimed
  if (src_qp == qpn_) {
    has_candidate_ = false;
    return Heard::confirmed;
  }
  if (src_qp != candidate_) return Heard::none;
  qpn_ = candidate_;
  has_candidate_ = false;
  return Heard::rebound;
}

void PeerBinding::bind(uint32_t qpn) {
  qpn_ = qpn;
  bound_ = true;
  has_candidate_ = false;
}

DatagramDest* DestTable::find(const SockAddr& a) {
  auto it = map_.find(a);
  if (it == map_.end()) return nullptr;
  DatagramDest* d = it->second.get();
  if (!d->self && d != newest_) {
    unlink(d);
    link_newest(d);
  }
  return d;
}

DatagramDest* DestTable::add(const SockAddr& a, DatagramQp* qp, const CanEvict& can_evict,
                             std::unique_ptr<DatagramDest>* evicted) {
  if (peers_ >= max_) {
    // One never bound first (a flood of made-up sources binds none), then any.
    DatagramDest* victim = oldest_;
    while (victim && (victim->ah || !can_evict(*victim))) victim = victim->newer;
    if (!victim) {
      victim = oldest_;
      while (victim && !can_evict(*victim)) victim = victim->newer;
    }
    if (!victim) return nullptr;
    unlink(victim);
    auto it = map_.find(victim->addr);
    *evicted = std::move(it->second);
    map_.erase(it);
    --peers_;
    ++evictions_;
  }
  auto d = std::make_unique<DatagramDest>();
  d->addr = a;
  d->qp = qp;
  DatagramDest* p = d.get();
  map_.emplace(a, std::move(d));
  link_newest(p);
  ++peers_;
  return p;
}

DatagramDest* DestTable::add_self(const SockAddr& a, DatagramQp* qp) {
  auto& d = map_[a];
  if (d && !d->self) {
    unlink(d.get());
    --peers_;
  }
  if (!d) d = std::make_unique<DatagramDest>();
  d->addr = a;
  d->qp = qp;
  d->self = true;
  return d.get();
}

void DestTable::link_newest(DatagramDest* d) {
  d->older = newest_;
  d->newer = nullptr;
  if (newest_) newest_->newer = d;
  newest_ = d;
  if (!oldest_) oldest_ = d;
}

void DestTable::unlink(DatagramDest* d) {
  (d->older ? d->older->newer : oldest_) = d->newer;
  (d->newer ? d->newer->older : newest_) = d->older;
  d->newer = d->older = nullptr;
}

}  // namespace rdmacm::rsocket
