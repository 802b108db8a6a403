// What the interposer takes over, from rdma-core's files and variables:
// /etc/rdma/rsocket/preload_config ("program domain type protocol" lines,
// '*' for any; without the file every stream and datagram socket of
// AF_INET/AF_INET6/AF_IB is taken), RS_SQ_SIZE, RS_RQ_SIZE, RS_INLINE
// (rsocket queue sizes and inline size) and RDMAV_FORK_SAFE (connections are
// made over TCP and moved to RDMA on first use, so a server may fork after
// accept()).
#pragma once

namespace rspreload {

struct Settings {
  int sq_size = 0;
  int rq_size = 0;
  int inline_size = 0;
  bool fork_safe = false;
};

const Settings& settings();

// Whether socket(domain, type, protocol) of this program becomes an rsocket.
bool wanted(int domain, int type, int protocol);

// Applies RS_SQ_SIZE and friends to a new rsocket (defaults on failure).
void apply_settings(int rfd);

}  // namespace rspreload
