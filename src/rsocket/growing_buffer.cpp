#include "rsocket/growing_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace rdmacm::rsocket {
namespace {

size_t whole_pages(size_t n) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

}  // namespace

GrowingBuffer::~GrowingBuffer() { clear(); }

void GrowingBuffer::swap(GrowingBuffer& o) noexcept {
  std::swap(pd_, o.pd_);
  std::swap(access_, o.access_);
  std::swap(base_, o.base_);
  std::swap(span_, o.span_);
  std::swap(size_, o.size_);
  std::swap(most_, o.most_);
  std::swap(first_, o.first_);
  std::swap(mr_, o.mr_);
  std::swap(old_mr_, o.old_mr_);
}

void GrowingBuffer::clear() {
  retire_old();
  if (mr_) ibv_dereg_mr(mr_);
  mr_ = nullptr;
  if (base_) munmap(base_, span_);
  base_ = nullptr;
}

// Mapped, not allocated: pages of its own (fork with RDMAV_FORK_SAFE unmaps
// registered pages, which must never hold the heap), zero until used.
int GrowingBuffer::init(ibv_pd* pd, int access, uint32_t most) {
  pd_ = pd;
  access_ = access;
  most_ = most;
  size_ = most;
  while (size_ > kFirstRing && size_ % 4 == 0) size_ /= 2;
  first_ = size_;
  span_ = whole_pages(most);
  void* p = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return -ENOMEM;
  base_ = static_cast<uint8_t*>(p);
  mr_ = ibv_reg_mr(pd_, base_, size_, access_);
  if (!mr_) return errno ? -errno : -ENOMEM;
  return 0;
}

bool GrowingBuffer::grow() {
  if (size_ == most_ || old_mr_) return false;
  uint32_t next = size_ * 2;
  ibv_mr* mr = ibv_reg_mr(pd_, base_, next, access_);
  if (!mr) {
    most_ = size_;
    return false;
  }
  old_mr_ = mr_;
  mr_ = mr;
  size_ = next;
  return true;
}

bool GrowingBuffer::shrink() {
  if (!grown() || old_mr_) return false;
  ibv_mr* mr = ibv_reg_mr(pd_, base_, first_, access_);
  if (!mr) return false;
  ibv_dereg_mr(mr_);
  mr_ = mr;
  size_t keep = whole_pages(first_);
  if (keep < span_) madvise(base_ + keep, span_ - keep, MADV_DONTNEED);
  size_ = first_;
  return true;
}

void GrowingBuffer::retire_old() {
  if (!old_mr_) return;
  ibv_dereg_mr(old_mr_);
  old_mr_ = nullptr;
}

}  // namespace rdmacm::rsocket
