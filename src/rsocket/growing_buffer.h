// A stream socket's send buffer: registered with the device, starting small
// and doubling up to its configured size when the traffic needs it (as TCP
// grows a connection's buffers: an idle connection keeps a few KiB pinned,
// not the configured 128 KiB), and shrinking back once the connection idles.
// Only local writes use it (the receive buffer
// is the peer's window and stays whole: stream.h). Its whole span is reserved
// at once (address space only), so whatever lies in it stays where it is as
// it grows; pages are touched and pinned only as far as it has grown.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace rdmacm::rsocket {

class GrowingBuffer {
 public:
  // The ring's first size: the configured size halved while above this
  // (and evenly halvable), so that doubling reaches it again exactly.
  static constexpr uint32_t kFirstRing = 8192;

  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  // Moved whole (a stream endpoint made ahead: endpoint.h); what the target
  // held goes to the source.
  GrowingBuffer(GrowingBuffer&& o) noexcept { swap(o); }
  GrowingBuffer& operator=(GrowingBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  ~GrowingBuffer();

  // 0 or -errno. most: the configured size.
  int init(ibv_pd* pd, int access, uint32_t most);
  uint8_t* ring() const { return base_; }
  uint32_t size() const { return size_; }
  uint32_t lkey() const { return mr_->lkey; }
  bool made() const { return base_ != nullptr; }  // init() was called (and never cleared)
  // Doubles the ring, registering the larger span; false (the ring as it
  // was) at its configured size or when the registration fails
  // (RLIMIT_MEMLOCK: it is not tried again). The previous registration
  // stays valid for what the device may still be doing with it, until
  // retire_old(); grow() waits for that.
  bool grow();
  bool has_old() const { return old_mr_ != nullptr; }
  void retire_old();
  // Back to its first size, once nothing in it is in flight (the caller
  // knows): the first size registered anew, the grown registration gone
  // and the pages past the first size given back to the kernel (zero when
  // touched again). False (as it was) when not grown, an old registration
  // is left, or the registration fails.
  bool shrink();
  bool grown() const { return size_ > first_; }
  void clear();  // deregistered and unmapped (the destructor's)

 private:
  void swap(GrowingBuffer& o) noexcept;

  ibv_pd* pd_ = nullptr;
  int access_ = 0;
  uint8_t* base_ = nullptr;
  size_t span_ = 0;
  uint32_t size_ = 0, most_ = 0, first_ = 0;
  ibv_mr* mr_ = nullptr;
  ibv_mr* old_mr_ = nullptr;
};

}  // namespace rdmacm::rsocket
