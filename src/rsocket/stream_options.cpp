// rsetsockopt / rgetsockopt on stream rsockets: what rdma-core 44's accept, with
// the same meaning (most TCP options are accepted and remembered, since a
// reliable connection has no use for them), plus length checks rdma-core 44
// lacks (a short option value gives EINVAL instead of a read past it).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/cm.h"
#include "rsocket/option_value.h"
#include "rsocket/protocol.h"
#include "rsocket/stream.h"
#include "rsocket/stream_service.h"

namespace rdmacm::rsocket {
namespace {

void set_bit(uint64_t* opts, int name, bool on) {
  if (name < 0 || name >= 64) return;
  *opts = on ? *opts | 1ull << name : *opts & ~(1ull << name);
}

bool bit(uint64_t opts, int name) { return name >= 0 && name < 64 && (opts >> name & 1); }

unsigned system_keepalive_time() {
  unsigned t = 7200;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "re")) {
    if (std::fscanf(f, "%u", &t) != 1) t = 7200;
    std::fclose(f);
  }
  return t;
}

}  // namespace

int StreamSocket::set_option(int level, int name, const void* value, socklen_t len) {
  int v = 0;
  if (level == SOL_SOCKET && name == SO_LINGER) {
    if (!value) return -EFAULT;
    if (len < sizeof(linger)) return -EINVAL;
  } else if (!(level == SOL_RDMA && name == RDMA_ROUTE)) {
    if (int err = read_int(value, len, &v)) return err;
  }
  switch (level) {
    case SOL_SOCKET:
      switch (name) {
        case SO_REUSEADDR: {
          int err = core::set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, value, len);
          // As rdma-core 44: a bound IB id cannot change it, which is no error.
          if (err && err != -ENOSYS && !(state_ != kInit && id_->verbs &&
                                          id_->verbs->device->transport_type == IBV_TRANSPORT_IB))
            return err;
          set_bit(&so_opts_, name, v);
          return 0;
        }
        case SO_RCVBUF:
        case SO_SNDBUF:
          // As rdma-core 44: until the buffers exist.
          if (!(name == SO_RCVBUF ? ep_.rbuf != nullptr : ep_.sbuf.made())) sizes_.set(level, name, v);
          return 0;
        case SO_LINGER: {
          // Remembered and given back as set, as TCP's (rclose lingers in
          // the background whatever it says: stream.cpp).
          linger l;
          std::memcpy(&l, value, sizeof(l));
          linger_ = {l.l_onoff ? 1 : 0, l.l_linger};
          return 0;
        }
        case SO_KEEPALIVE:
          if (v && !keepalive_time_) keepalive_time_ = system_keepalive_time();
          if (static_cast<bool>(v) != keepalive_on_) {
            if (v) {
              if (int err = watch(Watch::keepalive, this)) return err;
            } else {
              unwatch(Watch::keepalive, this);
            }
            keepalive_on_ = v;
          }
          set_bit(&so_opts_, name, v);
          return 0;
        case SO_OOBINLINE:
          set_bit(&so_opts_, name, v);
          return 0;
      }
      break;
    case IPPROTO_TCP:
      switch (name) {
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          // Nothing to tune on a reliable connection: remembered and given
          // back, as TCP's (1 to 127 and 1 to 32767, else EINVAL).
          if (v < 1 || v > (name == TCP_KEEPCNT ? 127 : 32767)) return -EINVAL;
          (name == TCP_KEEPCNT ? keepalive_count_ : keepalive_interval_) = v;
          return 0;
        case TCP_MAXSEG:
          return 0;  // nothing to tune on a reliable connection
        case TCP_KEEPIDLE:
          if (v <= 0) return -EINVAL;
          keepalive_time_ = static_cast<unsigned>(v);
          if (keepalive_on_) return watch(Watch::keepalive, this);  // rescheduled
          return 0;
        case TCP_NODELAY:
          set_bit(&tcp_opts_, name, v);
          return 0;
      }
      break;
    case IPPROTO_IPV6:
      if (name == IPV6_V6ONLY) {
        if (int err = core::set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, value, len))
          return err;
        set_bit(&ipv6_opts_, name, v);
        return 0;
      }
      break;
    case SOL_RDMA:
      if (state_ >= kOpening) return -EINVAL;
      switch (name) {
        case RDMA_SQSIZE:
        case RDMA_RQSIZE:
        case RDMA_INLINE:
          sizes_.set(level, name, v);
          return 0;
        case RDMA_IOMAPSIZE:
          target_iomap_size_ = static_cast<uint16_t>(
              wire::value_of(static_cast<uint8_t>(wire::scale_of(v, 8)), 8));
          return 0;
        case RDMA_ROUTE:
          if (!value) return -EFAULT;
          if (!len) return -EINVAL;
          route_.assign(static_cast<const uint8_t*>(value),
                        static_cast<const uint8_t*>(value) + len);
          return 0;
      }
      break;
  }
  return -ENOTSUP;
}

// The route as RDMA_ROUTE takes it: the one set and not used yet, else the
// id's path records as the kernel's path data (rdma-core 44 copies a set route
// the wrong way round, over the caller's value).
int StreamSocket::get_route(void* value, socklen_t* len) {
  if (!value || !len) return -EFAULT;
  if (!route_.empty()) {
    if (*len < route_.size()) return -EINVAL;
    std::memcpy(value, route_.data(), route_.size());
    *len = static_cast<socklen_t>(route_.size());
    return 0;
  }
  if (*len < sizeof(ibv_path_data)) return -EINVAL;
  socklen_t used = 0;
  for (int i = 0; i < id_->route.num_paths && used + sizeof(ibv_path_data) <= *len; ++i) {
    const ibv_sa_path_rec& r = id_->route.path_rec[i];
    ibv_path_data d{};
    d.path.dgid = r.dgid;
    d.path.sgid = r.sgid;
    d.path.dlid = r.dlid;
    d.path.slid = r.slid;
    d.path.flowlabel_hoplimit = htobe32(be32toh(r.flow_label) << 8 | r.hop_limit);
    d.path.tclass = r.traffic_class;
    d.path.reversible_numpath = static_cast<uint8_t>(r.reversible << 7 | 1);
    d.path.pkey = r.pkey;
    d.path.qosclass_sl = htobe16(r.sl);
    constexpr uint8_t kExactly = 2 << 6;  // the selector "exactly" in the top bits
    d.path.mtu = static_cast<uint8_t>(r.mtu | kExactly);
    d.path.rate = static_cast<uint8_t>(r.rate | kExactly);
    d.path.packetlifetime = static_cast<uint8_t>(r.packet_life_time | kExactly);
    d.flags = r.preference;
    std::memcpy(static_cast<uint8_t*>(value) + used, &d, sizeof(d));
    used += sizeof(d);
  }
  *len = used;
  return 0;
}

int StreamSocket::get_option(int level, int name, void* value, socklen_t* len) {
  if (int v; sizes_.get(level, name, &v)) return write_int(value, len, v);
  switch (level) {
    case SOL_SOCKET:
      switch (name) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          return write_int(value, len, bit(so_opts_, name));
        case SO_LINGER:
          return give_option(&linger_, sizeof(linger_), value, len);
        case SO_ERROR: {
          int err = write_int(value, len, err_);
          if (!err) err_ = 0;
          return err;
        }
      }
      break;
    case IPPROTO_TCP:
      switch (name) {
        case TCP_KEEPCNT:
          return write_int(value, len, keepalive_count_);
        case TCP_KEEPINTVL:
          return write_int(value, len, keepalive_interval_);
        case TCP_KEEPIDLE:
          return write_int(value, len, static_cast<int>(keepalive_time_));
        case TCP_NODELAY:
          return write_int(value, len, bit(tcp_opts_, name));
        case TCP_MAXSEG:
          return write_int(value, len,
                           id_->route.num_paths ? 1 << (7 + id_->route.path_rec->mtu) : 2048);
      }
      break;
    case IPPROTO_IPV6:
      if (name == IPV6_V6ONLY) return write_int(value, len, bit(ipv6_opts_, name));
      break;
    case SOL_RDMA:
      switch (name) {
        case RDMA_IOMAPSIZE:
          return write_int(value, len, target_iomap_size_);
        case RDMA_ROUTE:
          return get_route(value, len);
      }
      break;
  }
  return -ENOTSUP;
}

}  // namespace rdmacm::rsocket
