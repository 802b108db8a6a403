// riomap / riounmap / riowrite: a buffer mapped with PROT_WRITE is registered
// for remote writes and announced to the peer (an IomapEntry written into the
// peer's iomap table, which follows its target SGL); riowrite places bytes
// directly into a buffer the peer announced to us, with no receive consumed.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rsocket/stream.h"

namespace rdmacm::rsocket {

off_t StreamSocket::iomap(void* buf, size_t len, int prot, int, off_t offset) {
  if (!id_->pd || (prot & ~(PROT_WRITE | PROT_NONE))) return -EINVAL;
  if (!buf || !len || offset < -1) return -EINVAL;
  LockGuard lock(map_mutex_);
  Mapping m{0, nullptr, -1};
  if (prot & PROT_WRITE) {
    // One of the peer's table entries (it offered remote_iomap_.length).
    slot_used_.resize(remote_iomap_.length, false);
    auto free = std::find(slot_used_.begin(), slot_used_.end(), false);
    if (free == slot_used_.end()) return -ENOMEM;
    m.index = static_cast<int>(free - slot_used_.begin());
  }
  int access = IBV_ACCESS_LOCAL_WRITE | (prot & PROT_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
  m.mr = ibv_reg_mr(id_->pd, buf, len, access);
  if (!m.mr) return errno ? -errno : -ENOMEM;
  m.offset = offset == -1 ? reinterpret_cast<uintptr_t>(buf) : static_cast<uint64_t>(offset);
  if (m.index >= 0) {
    slot_used_[m.index] = true;
    pending_.push_back(m);
    iomaps_pending_.store(true, std::memory_order_release);
  } else {
    mapped_.push_back(m);
  }
  return static_cast<off_t>(m.offset);
}

int StreamSocket::iounmap(void* buf, size_t len) {
  LockGuard lock(map_mutex_);
  for (auto* list : {&mapped_, &pending_}) {
    auto it = std::find_if(list->begin(), list->end(), [&](const Mapping& m) {
      return m.mr->addr == buf && m.mr->length == len;
    });
    if (it == list->end()) continue;
    ibv_dereg_mr(it->mr);
    if (it->index >= 0) slot_used_[it->index] = false;
    list->erase(it);
    iomaps_pending_.store(!pending_.empty(), std::memory_order_release);
    return 0;
  }
  return -EINVAL;
}

void StreamSocket::release_mappings() {
  LockGuard lock(map_mutex_);
  for (auto* list : {&mapped_, &pending_}) {
    for (const Mapping& m : *list) ibv_dereg_mr(m.mr);
    list->clear();
  }
  iomaps_pending_.store(false, std::memory_order_release);
}

int StreamSocket::send_iomaps(int flags) {
  LockGuard lock(map_mutex_);
  int ret = 0;
  while (!pending_.empty()) {
    if ((ret = wait_send_room(flags))) break;
    Mapping m = pending_.front();
    wire::IomapEntry e{m.offset, {reinterpret_cast<uintptr_t>(m.mr->addr), m.mr->rkey,
                                  static_cast<uint32_t>(m.mr->length)}};
    if (swap_sgl_) e = wire::byteswapped(e);
    {
      LockGuard cq(cq_mutex_);
      ++sseq_no_;
      sqe_avail_ -= message_wrs();
      sbuf_bytes_avail_ -= static_cast<int>(sizeof(e));
      ret = post_from_sbuf(&e, sizeof(e),
                           wire::imm(wire::Op::iomap_sgl, static_cast<uint32_t>(m.index)),
                           remote_iomap_.addr + m.index * sizeof(wire::IomapEntry),
                           remote_iomap_.key, true);
    }
    pending_.erase(pending_.begin());
    mapped_.push_back(m);
    if (ret) break;
  }
  iomaps_pending_.store(!pending_.empty(), std::memory_order_release);
  return ret;
}

ssize_t StreamSocket::iowrite(const void* buf, size_t len, off_t offset, int flags) {
  if (!buf && len) return -EFAULT;
  if (!(state_ & kConnected)) return -ENOTCONN;
  LockGuard lock(send_mutex_);
  if (iomaps_pending_.load(std::memory_order_acquire)) {
    if (int err = send_iomaps(flags)) return err;
  }
  // The peer's announced buffers, as it wrote them into our table.
  auto* table = reinterpret_cast<volatile wire::IomapEntry*>(ep_.target_sgl + wire::kTargetSglSize);
  auto* in = static_cast<const uint8_t*>(buf);
  size_t left = len;
  uint64_t at = static_cast<uint64_t>(offset);
  int ret = 0;
  wire::IomapEntry target{};  // the entry `at` falls in (looked up again once past it)
  auto inside = [&](const wire::IomapEntry& e) { return at >= e.offset && at < e.offset + e.sge.length; };
  while (left) {
    for (uint16_t i = 0; i < target_iomap_size_ && !inside(target); ++i)
      std::memcpy(&target, const_cast<wire::IomapEntry*>(&table[i]), sizeof(target));
    if (!inside(target)) break;  // rdma-core 44 stops at an unmapped offset too
    if ((ret = wait_send_room(flags))) break;
    uint32_t size = next_write_size(left);
    {
      LockGuard cq(cq_mutex_);
      size = fit_send_ring(size);
      size = static_cast<uint32_t>(std::min<uint64_t>(size, target.offset + target.sge.length - at));
      --sqe_avail_;
      sbuf_bytes_avail_ -= static_cast<int>(size);
      ret = post_from_sbuf(in, size, wire::imm(wire::Op::write, size),
                           target.sge.addr + (at - target.offset), target.sge.key, false);
    }
    if (ret) break;
    left -= size;
    in += size;
    at += size;
  }
  return ret && left == len ? ret : static_cast<ssize_t>(len - left);
}

}  // namespace rdmacm::rsocket
