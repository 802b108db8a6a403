#include "rsocket/config.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "rsocket/protocol.h"

namespace rdmacm::rsocket {
namespace {

constexpr const char* kDir = "/etc/rdma/rsocket/";

// Reads one number from kDir/name into value; leaves it alone (and says
// false) if the file is missing or holds no number.
template <typename T>
bool read(const char* name, T* value) {
  char path[128];
  std::snprintf(path, sizeof(path), "%s%s", kDir, name);
  FILE* f = std::fopen(path, "re");
  if (!f) return false;
  unsigned long long v = 0;
  bool got = std::fscanf(f, "%llu", &v) == 1;
  if (got) *value = static_cast<T>(v);
  std::fclose(f);
  return got;
}

Config load() {
  Config c;
  read("polling_time", &c.polling_time);
  read("wake_up_interval", &c.wake_up_interval);
  read("inline_default", &c.inline_default);
  c.sqsize_set = read("sqsize_default", &c.sqsize_default);
  c.rqsize_set = read("rqsize_default", &c.rqsize_default);
  read("mem_default", &c.mem_default);
  if (c.mem_default < 1) c.mem_default = 1;
  read("wmem_default", &c.wmem_default);
  if (c.wmem_default < wire::kSendLowWater) c.wmem_default = wire::kSendLowWater << 1;
  read("iomap_size", &c.iomap_size);
  read("zcopy_min", &c.zcopy_min);
  if (const char* env = std::getenv("RSOCKET_ZCOPY_MIN")) c.zcopy_min = std::strtoull(env, nullptr, 0);
  read("endpoints_ahead", &c.endpoints_ahead);
  if (const char* env = std::getenv("RSOCKET_ENDPOINTS_AHEAD"))
    c.endpoints_ahead = static_cast<uint32_t>(std::strtoul(env, nullptr, 0));
  c.endpoints_ahead = std::min<uint32_t>(c.endpoints_ahead, 16);  // each pins ~140 KiB
  // Only sizes the 8-bit scale can carry.
  c.iomap_size = static_cast<uint16_t>(
      wire::scale_of(static_cast<uint16_t>(wire::value_of(c.iomap_size, 8)), 8) & 0xFF);
  return c;
}

}  // namespace

const Config& config() {
  static std::once_flag once;
  static Config* c;
  std::call_once(once, [] { c = new Config(load()); });
  return *c;
}

}  // namespace rdmacm::rsocket
