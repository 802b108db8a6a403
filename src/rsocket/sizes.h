// The sizes both socket kinds take from config(), a listener and
// setsockopt: buffer bytes, queue depths, inline bytes. Each socket fixes
// them when it makes its endpoint (stream: at connect or accept; datagram:
// at the first bind, connect or send) and says under which lock they change
// until then.
#pragma once

#include <cstdint>

namespace rdmacm::rsocket {

struct Sizes {
  uint32_t sbuf_size;  // send buffer bytes
  uint32_t rbuf_size;  // receive buffer bytes
  uint16_t sq_size;    // send queue depth
  uint16_t rq_size;    // receive queue depth
  uint16_t sq_inline;  // bytes a send may carry inline
  // A queue's depth was asked for (RDMA_SQSIZE, RDMA_RQSIZE, the
  // {sq,rq}size_default files), not rdma-core's default: a stream
  // connection's QP is made that deep, not at most kUnaskedDepth
  // (endpoint.h).
  bool sq_size_asked, rq_size_asked;

  // /etc/rdma/rsocket/*'s defaults (config.h).
  static Sizes defaults();

  // SO_SNDBUF, SO_RCVBUF (doubled, as the kernel's: getsockopt answers the
  // double), RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE, with rdma-core 44's
  // bounds. false if (level, name) is none of them.
  bool set(int level, int name, int value);
  bool get(int level, int name, int* value) const;

  // The queues within what the device allows (max_wr: 0 if unknown) and
  // no shallower than min_depth.
  void fit_queues(uint32_t max_wr, uint16_t min_depth);
};

}  // namespace rdmacm::rsocket
