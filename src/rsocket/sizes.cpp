#include "rsocket/sizes.h"

#include <rdma/rsocket.h>
#include <sys/socket.h>

#include <algorithm>

#include "rsocket/config.h"
#include "rsocket/protocol.h"

namespace rdmacm::rsocket {
namespace {

constexpr uint32_t kQpMaxSize = 0xFFFE;  // rdma-core 44's RS_QP_MAX_SIZE, for queues and inline

uint16_t at_most_qp_max(int v) {
  return static_cast<uint16_t>(std::min(static_cast<uint32_t>(v), kQpMaxSize));
}

}  // namespace

Sizes Sizes::defaults() {
  const Config& c = config();
  return {c.wmem_default, c.mem_default, c.sqsize_default, c.rqsize_default, c.inline_default,
          c.sqsize_set, c.rqsize_set};
}

bool Sizes::set(int level, int name, int value) {
  if (level == SOL_SOCKET && name == SO_RCVBUF) {
    rbuf_size = static_cast<uint32_t>(value) << 1;
  } else if (level == SOL_SOCKET && name == SO_SNDBUF) {
    sbuf_size = static_cast<uint32_t>(value) << 1;
    if (sbuf_size < wire::kSendLowWater) sbuf_size = wire::kSendLowWater << 1;
  } else if (level == SOL_RDMA && name == RDMA_SQSIZE) {
    sq_size = at_most_qp_max(value);
    sq_size_asked = true;
  } else if (level == SOL_RDMA && name == RDMA_RQSIZE) {
    rq_size = at_most_qp_max(value);
    rq_size_asked = true;
  } else if (level == SOL_RDMA && name == RDMA_INLINE) {
    sq_inline = at_most_qp_max(value);
  } else {
    return false;
  }
  return true;
}

bool Sizes::get(int level, int name, int* value) const {
  if (level == SOL_SOCKET && name == SO_RCVBUF)
    *value = static_cast<int>(rbuf_size);
  else if (level == SOL_SOCKET && name == SO_SNDBUF)
    *value = static_cast<int>(sbuf_size);
  else if (level == SOL_RDMA && name == RDMA_SQSIZE)
    *value = sq_size;
  else if (level == SOL_RDMA && name == RDMA_RQSIZE)
    *value = rq_size;
  else if (level == SOL_RDMA && name == RDMA_INLINE)
    *value = sq_inline;
  else
    return false;
  return true;
}

void Sizes::fit_queues(uint32_t max_wr, uint16_t min_depth) {
  uint32_t max = std::min(max_wr ? max_wr : kQpMaxSize, kQpMaxSize);
  max = std::max<uint32_t>(max, min_depth);
  sq_size = static_cast<uint16_t>(std::clamp<uint32_t>(sq_size, min_depth, max));
  rq_size = static_cast<uint16_t>(std::clamp<uint32_t>(rq_size, min_depth, max));
}

}  // namespace rdmacm::rsocket
