// Datagram rsockets: creation, bind/connect, destinations, sending (over UD,
// or over UDP to a destination whose QP is not known yet), names, options
// and close. Completions and receiving are datagram_io.cpp's; QPs, address
// handles and the UDP service are datagram_service.cpp's.
#include "rsocket/datagram.h"

#include <arpa/inet.h>
#include <rdma/rsocket.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cm.h"
#include "rsocket/config.h"
#include "rsocket/kernel_fds.h"
#include "rsocket/option_value.h"
#include "rsocket/table.h"

namespace rdmacm::rsocket {
namespace {

static_assert(wire::kUdpQkey == RDMA_UDP_QKEY);

constexpr uint16_t kQpMaxSize = 0xFFFE;

socklen_t addr_len(sa_family_t family) {
  return family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// An application's address, checked (rdma-core copies addrlen bytes into a
// 28-byte union and reads a family it never checked) and made a map key.
int to_key(const sockaddr* addr, socklen_t len, DatagramSocket::Addr* key) {
  if (!addr) return -EDESTADDRREQ;
  if (len < sizeof(sa_family_t)) return -EINVAL;
  *key = {};
  if (addr->sa_family == AF_INET) {
    if (len < sizeof(sockaddr_in)) return -EINVAL;
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    key->sin.sin_family = AF_INET;
    key->sin.sin_port = in->sin_port;
    key->sin.sin_addr = in->sin_addr;
    return 0;
  }
  if (addr->sa_family == AF_INET6) {
    if (len < sizeof(sockaddr_in6)) return -EINVAL;
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    key->sin6.sin6_family = AF_INET6;
    key->sin6.sin6_port = in6->sin6_port;
    key->sin6.sin6_flowinfo = in6->sin6_flowinfo;
    key->sin6.sin6_addr = in6->sin6_addr;
    key->sin6.sin6_scope_id = in6->sin6_scope_id;
    return 0;
  }
  return -EAFNOSUPPORT;
}

// rdma-core's rs_any_addr: the wildcard or loopback, which name no device.
bool any_addr(const DatagramSocket::Addr& a) {
  if (a.sa.sa_family == AF_INET)
    return a.sin.sin_addr.s_addr == htonl(INADDR_ANY) ||
           a.sin.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
  return IN6_IS_ADDR_UNSPECIFIED(&a.sin6.sin6_addr) || IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr);
}

}  // namespace

bool DatagramSocket::AddrLess::operator()(const Addr& a, const Addr& b) const {
  return std::memcmp(&a, &b, sizeof(Addr)) < 0;
}

DatagramSocket* DatagramSocket::create(int domain, int* err) {
  auto* s = new (std::nothrow) DatagramSocket;
  if (!s) {
    *err = -ENOMEM;
    return nullptr;
  }
  const Config& c = config();
  s->sbuf_size_ = c.wmem_default;
  s->rbuf_size_ = c.mem_default;
  s->sq_size_ = c.sqsize_default;
  s->rq_size_ = c.rqsize_default;
  s->sq_inline_ = c.inline_default;
  // The fd is the UDP socket's, as rdma-core's (AF_IB has none: EAFNOSUPPORT).
  s->fd_ = kernel_udp_socket(domain, 0);
  if (s->fd_ < 0 || (s->epfd_ = kernel_epoll()) < 0) {
    *err = -errno;
    delete s;
    return nullptr;
  }
  if (!insert_file(s->fd_, s)) {
    *err = -ENOMEM;
    delete s;
    return nullptr;
  }
  return s;
}

DatagramSocket::~DatagramSocket() {
  if (in_service_) unwatch_udp(this);
  if (fd_ >= 0 && find_socket(fd_) == this) remove_file(fd_);
  // Address handles before the QPs' ids (and with them the PD's users) go.
  for (auto& [addr, dest] : dests_)
    if (dest->ah) ibv_destroy_ah(dest->ah);
  for (auto& qp : qps_) free_qp(qp.release());
  if (fd_ >= 0) ::close(fd_);
  if (epfd_ >= 0) ::close(epfd_);
  std::free(sbuf_);
}

// Sizes are fixed here: a datagram takes one slot of kDsSlotSize, so the
// buffers are whole numbers of slots and the queues no longer than that.
int DatagramSocket::init_endpoint() {
  if (endpoint_) return 0;
  std::lock_guard lock(init_mutex_);
  if (endpoint_) return 0;
  uint32_t max = std::min<uint32_t>(core::max_qp_wr(nullptr), kQpMaxSize);
  if (max && sq_size_ > max) sq_size_ = static_cast<uint16_t>(max);
  if (max && rq_size_ > max) rq_size_ = static_cast<uint16_t>(max);
  if (rq_size_ > rbuf_size_ / wire::kDsSlotSize)
    rq_size_ = static_cast<uint16_t>(rbuf_size_ / wire::kDsSlotSize);
  else
    rbuf_size_ = rq_size_ * wire::kDsSlotSize;
  if (sq_size_ > sbuf_size_ / wire::kDsSlotSize)
    sq_size_ = static_cast<uint16_t>(sbuf_size_ / wire::kDsSlotSize);
  else
    sbuf_size_ = sq_size_ * wire::kDsSlotSize;
  if (!sq_size_ || !rq_size_) return -EINVAL;
  std::free(sbuf_);  // a failed earlier attempt's
  sbuf_ = static_cast<uint8_t*>(std::calloc(sq_size_, wire::kDsSlotSize));
  if (!sbuf_) return -ENOMEM;
  free_slots_.clear();
  free_slots_.reserve(sq_size_);
  for (uint32_t i = sq_size_; i-- > 0;) free_slots_.push_back(i * wire::kDsSlotSize);
  rmsg_.resize(rq_size_ + 1u);
  sqe_avail_ = sq_size_;
  rqe_avail_ = rq_size_;
  if (int err = watch_udp(this)) return err;
  in_service_ = true;
  endpoint_ = true;
  readable_ = writable_ = true;
  return 0;
}

// Where datagrams to dst leave from: the UDP socket's address, or when that
// is a wildcard, the address the kernel routes dst from (with our port).
int DatagramSocket::source_for(const sockaddr* dst, socklen_t dst_len, Addr* src) {
  socklen_t len = sizeof(*src);
  if (::getsockname(fd_, &src->sa, &len)) return -errno;
  if (src->sa.sa_family == AF_INET ? !src->sin.sin_port : !src->sin6.sin6_port) {
    // Never bound: bind to a port now (rdma-core would name port 0 as the
    // source, which no answer reaches).
    Addr any{};
    any.sa.sa_family = src->sa.sa_family;
    if (::bind(fd_, &any.sa, addr_len(any.sa.sa_family)) && errno != EINVAL) return -errno;
    len = sizeof(*src);
    if (::getsockname(fd_, &src->sa, &len)) return -errno;
  }
  if (!any_addr(*src)) return 0;
  in_port_t port = src->sin.sin_port;  // same offset in sockaddr_in6
  int sock = kernel_udp_socket(dst->sa_family, SOCK_CLOEXEC);
  if (sock < 0) return -errno;
  int err = 0;
  len = sizeof(*src);
  if (::connect(sock, dst, dst_len) || ::getsockname(sock, &src->sa, &len)) err = -errno;
  ::close(sock);
  src->sin.sin_port = port;
  return err;
}

int DatagramSocket::get_dest(const sockaddr* addr, socklen_t len, Dest** out) {
  Addr key;
  if (int err = to_key(addr, len, &key)) return err;
  std::lock_guard lock(map_mutex_);
  if (auto it = dests_.find(key); it != dests_.end()) {
    *out = it->second.get();
    return 0;
  }
  Addr src{};
  if (int err = source_for(&key.sa, addr_len(key.sa.sa_family), &src)) return err;
  Addr src_key;
  to_key(&src.sa, addr_len(src.sa.sa_family), &src_key);
  Qp* qp = nullptr;
  if (int err = get_qp(src_key, &qp)) return err;
  // The destination may be the QP just made (sending to ourselves).
  auto& dest = dests_[key];
  if (!dest) {
    dest = std::make_unique<Dest>();
    dest->addr = key;
    dest->qp = qp;
    ++dests_without_ah_;
  }
  *out = dest.get();
  return 0;
}

int DatagramSocket::bind(const sockaddr* addr, socklen_t len) {
  if (int err = init_endpoint()) return err;
  return ::bind(fd_, addr, len) ? -errno : 0;
}

int DatagramSocket::connect(const sockaddr* addr, socklen_t len) {
  if (!addr) return -EFAULT;
  if (int err = init_endpoint()) return err;
  std::lock_guard lock(send_mutex_);
  if (::connect(fd_, addr, len)) return -errno;
  return get_dest(addr, len, &conn_dest_);
}

// Over UDP: the peer's service learns our QPN from the header and, for op
// data, forwards the payload to its own QP.
ssize_t DatagramSocket::send_udp(Dest* dest, const void* buf, size_t len, int flags, wire::Op op) {
  const wire::DsHeader& from = dest->qp->hdr;
  wire::DsUdpHeader hdr{};
  hdr.tag = htobe32(wire::kDsUdpTag);
  hdr.version = from.version;
  hdr.op = static_cast<uint8_t>(op);
  hdr.qpn = htobe32(dest->qp->id->qp->qp_num & 0xFFFFFF);
  if (from.version == 4) {
    hdr.length = wire::kDsUdpIpv4HeaderLength;
    hdr.addr.ipv4 = from.addr.ipv4;
  } else {
    hdr.length = wire::kDsUdpIpv6HeaderLength;
    std::memcpy(hdr.addr.ipv6, from.addr.ipv6.addr, 16);
  }
  iovec iov[2] = {{&hdr, hdr.length}, {const_cast<void*>(buf), len}};
  msghdr msg{};
  msg.msg_name = &dest->addr;
  msg.msg_namelen = addr_len(dest->addr.sa.sa_family);
  msg.msg_iov = iov;
  msg.msg_iovlen = buf && len ? 2 : 1;
  ssize_t n = ::sendmsg(fd_, &msg, flags & (MSG_DONTWAIT | MSG_CONFIRM));
  if (n < 0) return -errno;
  return n - hdr.length;
}

// Over UD: one send slot holds the header and the payload.
ssize_t DatagramSocket::send_ud(Dest* dest, const wire::DsHeader& hdr, const void* buf, size_t len,
                                int flags) {
  if (!can_send()) {
    if (int err = completion(nonblocking(flags), &DatagramSocket::can_send)) return err;
  }
  std::lock_guard cq(cq_mutex_);
  uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  --sqe_avail_;
  uint8_t* msg = sbuf_ + slot;
  std::memcpy(msg, &hdr, hdr.length);
  if (len) std::memcpy(msg + hdr.length, buf, len);
  ibv_sge sge{reinterpret_cast<uintptr_t>(msg), static_cast<uint32_t>(hdr.length + len),
              dest->qp->smr->lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = sge.length <= sq_inline_ ? IBV_SEND_INLINE : 0;
  wr.wr.ud.ah = dest->ah;
  wr.wr.ud.remote_qpn = dest->qpn;
  wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
  if (int err = ibv_post_send(dest->qp->id->qp, &wr, &bad)) {
    free_slots_.push_back(slot);
    ++sqe_avail_;
    return err > 0 ? -err : err;
  }
  return static_cast<ssize_t>(len);
}

ssize_t DatagramSocket::send(const void* buf, size_t len, int flags) {
  if (!buf && len) return -EFAULT;
  std::lock_guard lock(send_mutex_);
  if (!conn_dest_) return -EDESTADDRREQ;  // rdma-core: a NULL dereference
  Dest* dest = conn_dest_;
  if (len > wire::kDsSlotSize - dest->qp->hdr.length) return -EMSGSIZE;
  if (!dest->ah) return send_udp(dest, buf, len, flags, wire::Op::data);
  return send_ud(dest, dest->qp->hdr, buf, len, flags);
}

// As UDP: no address on a connected socket sends to its peer.
ssize_t DatagramSocket::send_to(const void* buf, size_t len, int flags, const sockaddr* dst,
                                socklen_t dst_len) {
  if (!dst && !dst_len) return send(buf, len, flags);
  if (!buf && len) return -EFAULT;
  Addr key;
  if (int err = to_key(dst, dst_len, &key)) return err;
  // Before making a QP for it: one slot holds the header and the payload
  // (rdma-core copies past the slot).
  size_t room = wire::kDsSlotSize - (key.sa.sa_family == AF_INET ? wire::kDsIpv4HeaderLength
                                                                 : wire::kDsIpv6HeaderLength);
  if (len > room) return -EMSGSIZE;
  if (int err = init_endpoint()) return err;
  std::lock_guard lock(send_mutex_);
  if (!conn_dest_ || std::memcmp(&key, &conn_dest_->addr, sizeof(key))) {
    if (int err = get_dest(dst, dst_len, &conn_dest_)) return err;
  }
  Dest* dest = conn_dest_;
  if (len > wire::kDsSlotSize - dest->qp->hdr.length) return -EMSGSIZE;
  if (!dest->ah) return send_udp(dest, buf, len, flags, wire::Op::data);
  return send_ud(dest, dest->qp->hdr, buf, len, flags);
}

int DatagramSocket::shutdown(int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return -EINVAL;
  return ::shutdown(fd_, how) ? -errno : 0;
}

// As rdma-core's ds_shutdown: stop the service, then wait for our sends.
void DatagramSocket::release(std::unique_ptr<File>) {
  {
    std::lock_guard lock(init_mutex_);
    if (in_service_) unwatch_udp(this);
    in_service_ = false;
  }
  readable_ = writable_ = false;
  if (endpoint_ && !qps_.empty()) process_cqs(false, &DatagramSocket::all_sends_done);
}

int DatagramSocket::peer_name(sockaddr* addr, socklen_t* len) {
  return ::getpeername(fd_, addr, len) ? -errno : 0;
}

int DatagramSocket::sock_name(sockaddr* addr, socklen_t* len) {
  return ::getsockname(fd_, addr, len) ? -errno : 0;
}

int DatagramSocket::set_flags(int flags) {
  // Our CQ channels are never slept on directly (epoll is), so only the
  // flag changes: blocking calls sleep in epoll_wait unless it is set.
  fd_flags_ = flags;
  return 0;
}

// As rdma-core's: everything but SOL_RDMA reaches the UDP socket first; the
// buffer sizes and queue sizes are ours (until the first QP exists).
int DatagramSocket::set_option(int level, int name, const void* value, socklen_t len) {
  if (level != SOL_RDMA) {
    if (::setsockopt(fd_, level, name, value, len)) return -errno;
    if (level != SOL_SOCKET || (name != SO_RCVBUF && name != SO_SNDBUF)) return 0;
  }
  int v;
  if (int err = read_int(value, len, &v)) return err;
  std::lock_guard lock(init_mutex_);  // the sizes' lock until init_endpoint fixes them
  bool fixed = endpoint_;
  switch (level) {
    case SOL_SOCKET:
      if (fixed) return 0;
      if (name == SO_RCVBUF) rbuf_size_ = static_cast<uint32_t>(v) << 1;
      if (name == SO_SNDBUF) sbuf_size_ = std::max(static_cast<uint32_t>(v) << 1, wire::kDsSlotSize);
      return 0;
    case SOL_RDMA:
      if (fixed) return -EINVAL;
      switch (name) {
        case RDMA_SQSIZE:
          sq_size_ = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), kQpMaxSize));
          return 0;
        case RDMA_RQSIZE:
          rq_size_ = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), kQpMaxSize));
          return 0;
        case RDMA_INLINE:
          sq_inline_ = static_cast<uint16_t>(std::min<uint32_t>(static_cast<uint32_t>(v), 0xFFFF));
          return 0;
        default:
          return -ENOTSUP;
      }
    default:
      return -ENOTSUP;
  }
}

int DatagramSocket::get_option(int level, int name, void* value, socklen_t* len) {
  std::unique_lock lock(init_mutex_);  // the sizes' lock until init_endpoint fixes them
  if (level == SOL_SOCKET && name == SO_RCVBUF) return write_int(value, len, static_cast<int>(rbuf_size_));
  if (level == SOL_SOCKET && name == SO_SNDBUF) return write_int(value, len, static_cast<int>(sbuf_size_));
  if (level == SOL_RDMA) {
    switch (name) {
      case RDMA_SQSIZE:
        return write_int(value, len, sq_size_);
      case RDMA_RQSIZE:
        return write_int(value, len, rq_size_);
      case RDMA_INLINE:
        return write_int(value, len, sq_inline_);
      default:
        return -ENOTSUP;
    }
  }
  lock.unlock();
  return ::getsockopt(fd_, level, name, value, len) ? -errno : 0;
}

}  // namespace rdmacm::rsocket
