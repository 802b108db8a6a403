// Tunables, read once from /etc/rdma/rsocket/ as rdma-core 44 does.
#pragma once

#include <cstdint>

namespace rdmacm::rsocket {

struct Config {
  uint32_t mem_default = 1 << 17;   // receive buffer bytes
  uint32_t wmem_default = 1 << 17;  // send buffer bytes
  uint16_t inline_default = 64;
  uint16_t sqsize_default = 384;
  uint16_t rqsize_default = 384;
  bool sqsize_set = false, rqsize_set = false;  // the files named depths (sizes.h: *_asked)
  uint16_t iomap_size = 0;
  uint32_t polling_time = 10;       // microseconds rpoll and blocking calls spin
  int wake_up_interval = 5000;      // milliseconds between rpoll's re-checks
  // Ours: a blocking send of at least this many bytes goes from the caller's
  // buffer, not through the send buffer (0: never). File zcopy_min, or the
  // environment's RSOCKET_ZCOPY_MIN.
  uint64_t zcopy_min = 0;
  // Ours: how many stream endpoints may be made ahead for a run of connects
  // (endpoint_spares.h; 0: none). File endpoints_ahead, or the environment's
  // RSOCKET_ENDPOINTS_AHEAD.
  uint32_t endpoints_ahead = 2;
};

// The process's tunables (files read on first use).
const Config& config();

}  // namespace rdmacm::rsocket
