// What the interposer takes over, from rdma-core's files and variables:
// /etc/rdma/rsocket/preload_config ("program domain type protocol" lines,
// '*' for any; without the file every stream and datagram socket of
// AF_INET/AF_INET6/AF_IB is taken), RS_SQ_SIZE, RS_RQ_SIZE, RS_INLINE
// (rsocket queue sizes and inline size), RDMAV_FORK_SAFE (connections are
// made over TCP and moved to RDMA on first use, so a server may fork after
// accept()), and ours: RS_FALLBACK=0 (a connect or bind RDMA cannot serve
// fails with the RDMA error instead of going on over kernel TCP).
#pragma once

#include <stdio.h>

namespace rspreload {

// One preload_config line, "program domain type protocol": the program is a
// prefix of the name it runs as (case-insensitive), the others AF_*, SOCK_*
// and IPPROTO_* values, "*" (kAny) for any.
constexpr int kAny = -1;
struct Rule {
  char program[64];
  int domain, type, protocol;
};

// The rules of a preload_config read from f, in order (lines starting with
// '#', lines of fewer than four words and lines with a word it does not know
// are skipped; words past the fourth are ignored): *rules is malloc'd, NULL
// when the count returned is 0.
int read_rules(FILE* f, Rule** rules);

// Whether socket(domain, type, protocol) (type without SOCK_NONBLOCK and
// SOCK_CLOEXEC) in the program named `program` becomes an rsocket under these
// rules: only stream (TCP) and datagram (UDP) sockets of AF_INET, AF_INET6 and
// AF_IB, and of those, with no rules every one, else those a rule takes.
bool wanted(const Rule* rules, int count, const char* program, int domain, int type,
            int protocol);

struct Settings {
  int sq_size = 0;
  int rq_size = 0;
  int inline_size = 0;
  bool fork_safe = false;
  // A connect (or bind) that RDMA cannot serve goes on over kernel TCP, as
  // rdma-core's preload does; RS_FALLBACK=0: it fails with the RDMA error.
  bool fall_back = true;
};

// RS_FALLBACK's value (null when unset) as the fall_back setting: off for
// "0", "no", "off" or "false" (any case, surrounding blanks ignored), else on.
bool fall_back_from(const char* value);

const Settings& settings();

// wanted() under /etc/rdma/rsocket/preload_config's rules for this program.
bool wanted(int domain, int type, int protocol);

// Applies RS_SQ_SIZE and friends to a new rsocket (defaults on failure).
void apply_settings(int rfd);

}  // namespace rspreload
