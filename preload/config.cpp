#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <initializer_list>

namespace rspreload {
namespace {

constexpr const char* kConfig = "/etc/rdma/rsocket/preload_config";

Settings the_settings;
Rule* rules;
int rule_count;
pthread_once_t once = PTHREAD_ONCE_INIT;

int env_int(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : 0;
}

// One of the names in `names` (NULL-terminated pairs of spelling and value),
// kAny for "*", or -2 when the word means nothing.
int word(const char* w, const char* const* names, const int* values) {
  if (!strcmp(w, "*")) return kAny;
  for (int i = 0; names[i]; i++)
    if (!strcasecmp(w, names[i])) return values[i];
  return -2;
}

bool parse(const char* line, Rule* r) {
  char dom[16], type[16], proto[16];
  if (line[0] == '#' ||
      sscanf(line, "%63s%15s%15s%15s", r->program, dom, type, proto) != 4)
    return false;
  static const char* const dnames[] = {"INET", "AF_INET", "PF_INET", "INET6", "AF_INET6",
                                       "PF_INET6", "IB", "AF_IB", "PF_IB", nullptr};
  static const int dvalues[] = {AF_INET, AF_INET, AF_INET, AF_INET6, AF_INET6,
                                AF_INET6, AF_IB, AF_IB, AF_IB};
  static const char* const tnames[] = {"STREAM", "SOCK_STREAM", "DGRAM", "SOCK_DGRAM", nullptr};
  static const int tvalues[] = {SOCK_STREAM, SOCK_STREAM, SOCK_DGRAM, SOCK_DGRAM};
  static const char* const pnames[] = {"TCP", "IPPROTO_TCP", "UDP", "IPPROTO_UDP", nullptr};
  static const int pvalues[] = {IPPROTO_TCP, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDP};
  r->domain = word(dom, dnames, dvalues);
  r->type = word(type, tnames, tvalues);
  r->protocol = word(proto, pnames, pvalues);
  return r->domain != -2 && r->type != -2 && r->protocol != -2;
}

void load() {
  the_settings.sq_size = env_int("RS_SQ_SIZE");
  the_settings.rq_size = env_int("RS_RQ_SIZE");
  the_settings.inline_size = env_int("RS_INLINE");
  the_settings.fork_safe = env_int("RDMAV_FORK_SAFE") != 0;
  the_settings.fall_back = fall_back_from(getenv("RS_FALLBACK"));

  int saved = errno;
  FILE* f = fopen(kConfig, "re");
  if (f) {
    rule_count = read_rules(f, &rules);
    fclose(f);
  }
  errno = saved;
}

bool matches(const Rule& r, const char* program, int domain, int type, int protocol) {
  if (strcmp(r.program, "*") && strncasecmp(r.program, program, strlen(r.program)))
    return false;
  return (r.domain == kAny || r.domain == domain) && (r.type == kAny || r.type == type) &&
         (r.protocol == kAny || r.protocol == protocol);
}

}  // namespace

bool fall_back_from(const char* value) {
  if (!value) return true;
  while (*value == ' ' || *value == '\t') value++;
  size_t n = strlen(value);
  while (n && (value[n - 1] == ' ' || value[n - 1] == '\t' || value[n - 1] == '\n')) n--;
  for (const char* off : {"0", "no", "off", "false"})
    if (n == strlen(off) && !strncasecmp(value, off, n)) return false;
  return true;
}

const Settings& settings() {
  pthread_once(&once, load);
  return the_settings;
}

int read_rules(FILE* f, Rule** out) {
  Rule* list = nullptr;
  int count = 0;
  char line[160];
  const size_t last = sizeof line - 1;
  Rule r;
  for (line[last] = 1; fgets(line, sizeof line, f); line[last] = 1) {
    // The buffer filled (fgets ended it at its last byte) before a newline:
    // the rest of a longer line is no line of its own. (strchr(line, '\n')
    // would stop at a NUL byte in the line.)
    if (line[last] == 0 && line[last - 1] != '\n') {
      int c;
      while ((c = getc(f)) != EOF && c != '\n') {
      }
    }
    if (!parse(line, &r)) continue;
    Rule* grown = static_cast<Rule*>(realloc(list, (count + 1) * sizeof(Rule)));
    if (!grown) break;
    list = grown;
    list[count++] = r;
  }
  *out = list;
  return count;
}

bool wanted(const Rule* list, int count, const char* program, int domain, int type,
            int protocol) {
  if (domain != AF_INET && domain != AF_INET6 && domain != AF_IB) return false;
  if (type == SOCK_STREAM) {
    if (protocol && protocol != IPPROTO_TCP) return false;
    protocol = IPPROTO_TCP;
  } else if (type == SOCK_DGRAM) {
    if (protocol && protocol != IPPROTO_UDP) return false;
    protocol = IPPROTO_UDP;
  } else {
    return false;
  }
  if (!count) return true;
  for (int i = 0; i < count; i++)
    if (matches(list[i], program, domain, type, protocol)) return true;
  return false;
}

bool wanted(int domain, int type, int protocol) {
  settings();
  return wanted(rules, rule_count, program_invocation_short_name, domain, type, protocol);
}

void apply_settings(int rfd) {
  const Settings& s = settings();
  if (s.sq_size) rsetsockopt(rfd, SOL_RDMA, RDMA_SQSIZE, &s.sq_size, sizeof s.sq_size);
  if (s.rq_size) rsetsockopt(rfd, SOL_RDMA, RDMA_RQSIZE, &s.rq_size, sizeof s.rq_size);
  if (s.inline_size)
    rsetsockopt(rfd, SOL_RDMA, RDMA_INLINE, &s.inline_size, sizeof s.inline_size);
}

}  // namespace rspreload
