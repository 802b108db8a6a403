// Datagram rsockets: creation, bind/connect, destinations, sending (over UD,
// or over UDP to a destination whose QP is not known yet), names, options
// and close. Completions and receiving are datagram_io.cpp's; QPs and address
// handles datagram_qp.cpp's; the UDP service datagram_service.cpp's.
#include "rsocket/datagram.h"

#include <arpa/inet.h>
#include <rdma/rsocket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cm.h"
#include "rsocket/caller_memory.h"
#include "rsocket/config.h"
#include "rsocket/kernel_fds.h"
#include "rsocket/option_value.h"
#include "rsocket/table.h"

namespace rdmacm::rsocket {
namespace {

static_assert(wire::kUdpQkey == RDMA_UDP_QKEY);

// rdma-core 44's rs_any_addr: the wildcard or loopback, which name no device.
bool any_addr(const DatagramSocket::Addr& a) {
  if (a.sa.sa_family == AF_INET)
    return a.sin.sin_addr.s_addr == htonl(INADDR_ANY) ||
           a.sin.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
  return IN6_IS_ADDR_UNSPECIFIED(&a.sin6.sin6_addr) || IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr);
}

}  // namespace

DatagramSocket* DatagramSocket::create(int domain, int* err) {
  auto* s = new (std::nothrow) DatagramSocket;
  if (!s) {
    *err = -ENOMEM;
    return nullptr;
  }
  // The fd is the UDP socket's, as rdma-core 44's (AF_IB has none: EAFNOSUPPORT).
  s->fd_ = kernel_udp_socket(domain, 0);
  if (s->fd_ < 0 || (s->epfd_ = kernel_epoll()) < 0 ||
      (s->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    *err = -errno;
    delete s;
    return nullptr;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // not a QP: the plain datagrams' wake-up
  if (epoll_ctl(s->epfd_, EPOLL_CTL_ADD, s->wake_fd_, &ev)) {
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
  if (in_service_) {
    unwatch_udp(&udp_watch_);
    unwatch_udp(&cm_watch_);
  }
  if (fd_ >= 0 && find_socket(fd_) == this) remove_file(fd_);
  // Resolutions and address handles before the QPs' ids (and with them the
  // PD's users) go; the service acknowledged every event it took.
  dests_.for_each([](Dest& d) {
    if (d.resolving) core::destroy_id(d.resolving);
    if (d.ah) ibv_destroy_ah(d.ah);
  });
  if (resolver_) core::destroy_channel(resolver_);
  for (auto& qp : qps_) free_qp(qp.release());
  if (fd_ >= 0) ::close(fd_);
  if (epfd_ >= 0) ::close(epfd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  std::free(sbuf_);
}

// Sizes are fixed here: a datagram takes one slot of kDsSlotSize, so the
// buffers are whole numbers of slots and the queues no longer than that.
int DatagramSocket::init_endpoint() {
  if (endpoint_) return 0;
  LockGuard lock(init_mutex_);
  if (endpoint_) return 0;
  sizes_.fit_queues(core::max_qp_wr(nullptr), 0);
  if (sizes_.rq_size > sizes_.rbuf_size / wire::kDsSlotSize)
    sizes_.rq_size = static_cast<uint16_t>(sizes_.rbuf_size / wire::kDsSlotSize);
  else
    sizes_.rbuf_size = sizes_.rq_size * wire::kDsSlotSize;
  if (sizes_.sq_size > sizes_.sbuf_size / wire::kDsSlotSize)
    sizes_.sq_size = static_cast<uint16_t>(sizes_.sbuf_size / wire::kDsSlotSize);
  else
    sizes_.sbuf_size = sizes_.sq_size * wire::kDsSlotSize;
  if (!sizes_.sq_size || !sizes_.rq_size) return -EINVAL;
  std::free(sbuf_);  // a failed earlier attempt's
  sbuf_ = static_cast<uint8_t*>(std::calloc(sizes_.sq_size, wire::kDsSlotSize));
  if (!sbuf_) return -ENOMEM;
  {
    LockGuard cq(cq_mutex_);
    free_slots_.clear();
    free_slots_.reserve(sizes_.sq_size);
    for (uint32_t i = sizes_.sq_size; i-- > 0;) free_slots_.push_back(i * wire::kDsSlotSize);
    rmsg_.resize(sizes_.rq_size + 1u);
    sqe_avail_ = sizes_.sq_size;
    rqe_avail_ = sizes_.rq_size;
  }
  // The resolutions' channel: the service takes its events, never waiting.
  // Without one (no RDMA CM on this host) no address is resolved: nothing
  // could use it.
  if (!resolver_ && !core::create_channel(&resolver_) && set_fd_nonblocking(resolver_->fd, true)) {
    core::destroy_channel(resolver_);
    resolver_ = nullptr;
  }
  udp_watch_ = {this, &DatagramSocket::process_udp, fd_};
  cm_watch_ = {this, &DatagramSocket::process_resolutions, resolver_ ? resolver_->fd : -1};
  if (int err = watch_udp(&udp_watch_)) return err;
  if (resolver_) {
    if (int err = watch_udp(&cm_watch_)) {
      unwatch_udp(&udp_watch_);
      return err;
    }
  }
  in_service_ = true;
  endpoint_ = true;
  readable_ = writable_ = true;
  return 0;
}

// Where datagrams to dst leave from: the UDP socket's address, or when that
// is a wildcard, the address the kernel routes dst from (with our port).
int DatagramSocket::source_for(const sockaddr* dst, socklen_t dst_len, Addr* src) {
  if (int err = bound_name(src)) return err;
  if (!any_addr(*src)) return 0;
  in_port_t port = src->sin.sin_port;  // same offset in sockaddr_in6
  int sock = kernel_udp_socket(dst->sa_family, SOCK_CLOEXEC);
  if (sock < 0) return -errno;
  int err = 0;
  socklen_t len = sizeof(*src);
  if (::connect(sock, dst, dst_len) || ::getsockname(sock, &src->sa, &len)) err = -errno;
  ::close(sock);
  src->sin.sin_port = port;
  return err;
}

int DatagramSocket::get_dest(const sockaddr* addr, socklen_t len, Dest** out) {
  Addr key;
  if (int err = to_key(addr, len, &key)) return err;
  uint64_t drained;
  {
    LockGuard cq(cq_mutex_);
    drained = drained_;
  }
  LockGuard lock(map_mutex_);
  if (Dest* d = dests_.find(key)) {
    *out = d;
    return 0;
  }
  Addr src{};
  if (int err = source_for(&key.sa, sockaddr_len(key.sa.sa_family), &src)) return err;
  Addr src_key;
  to_key(&src.sa, sockaddr_len(src.sa.sa_family), &src_key);
  Qp* qp = nullptr;
  if (int err = get_rdma_qp(src_key, &qp)) return err;
  // The destination may be the QP just made (sending to ourselves).
  if (Dest* d = dests_.find(key)) {
    *out = d;
    return 0;
  }
  // A peer that leaves the table: no sender holds it (conn_dest_, last_dest_; the UDP
  // service holds send_mutex_ while it uses one), no resolution uses it,
  // and every send to it has completed (its AH may go).
  const Dest* held = conn_dest_;
  const Dest* cached = last_dest_;
  std::unique_ptr<Dest> evicted;
  Dest* d = dests_.add(
      key, qp,
      [&](const Dest& d) {
        return &d != held && &d != cached && !d.resolving && d.last_post <= drained;
      },
      &evicted);
  if (!d) return -ENOBUFS;
  ++dests_unsettled_;  // no AH yet
  if (evicted) {
    if (evicted->over_udp()) --dests_unsettled_;
    if (evicted->ah) ibv_destroy_ah(evicted->ah);
  }
  *out = d;
  return 0;
}

int DatagramSocket::bind(const sockaddr* addr, socklen_t len) {
  if (int err = init_endpoint()) return err;
  return ::bind(fd_, addr, len) ? -errno : 0;
}

// A destination with no RDMA path is connected to over plain UDP
// (datagram_plain.cpp); connecting again replaces the peer, and AF_UNSPEC
// removes it, as UDP's.
int DatagramSocket::connect(const sockaddr* addr, socklen_t len) {
  if (!addr) return -EFAULT;
  if (int err = init_endpoint()) return err;
  LockGuard lock(send_mutex_);
  {
    LockGuard fd(fd_mutex_);
    if (::connect(fd_, addr, len)) return -errno;
  }
  if (addr->sa_family == AF_UNSPEC) {  // as UDP's: no peer any more
    conn_dest_ = nullptr;
    conn_plain_ = false;
    LockGuard cq(cq_mutex_);
    connected_ = false;
    return 0;
  }
  Addr key;
  conn_dest_ = nullptr;
  bool known = !to_key(addr, len, &key);
  {
    LockGuard cq(cq_mutex_);
    connected_ = known;
    conn_addr_ = key;
  }
  conn_plain_ = known && plain_path(key);
  if (conn_plain_) return 0;
  int err = get_dest(addr, len, &conn_dest_);
  conn_plain_ = err == -ENODEV;  // no RDMA device has our address towards it
  return conn_plain_ ? 0 : err;
}

// Over UDP: the peer's service learns our QPN from the header and, for op
// data, forwards the payload to its own QP.
ssize_t DatagramSocket::send_udp(Dest* dest, const void* buf, size_t len, int flags, wire::Op op) {
  wire::DsUdpHeader hdr = encode_udp_header(dest->qp->hdr, op, dest->qp->id->qp->qp_num);
  iovec iov[2] = {{&hdr, hdr.length}, {const_cast<void*>(buf), len}};
  msghdr msg{};
  msg.msg_name = &dest->addr;
  msg.msg_namelen = sockaddr_len(dest->addr.sa.sa_family);
  msg.msg_iov = iov;
  msg.msg_iovlen = buf && len ? 2 : 1;
  ssize_t n = ::sendmsg(fd_, &msg, flags & (MSG_DONTWAIT | MSG_CONFIRM));
  if (n < 0) return -errno;
  return n - hdr.length;
}

// Over UD: one send slot holds the header and the payload.
ssize_t DatagramSocket::send_ud(Dest* dest, const wire::DsHeader& hdr, const void* buf, size_t len,
                                int flags) {
  // Slots are taken under send_mutex_ only: room found stays.
  UniqueLock cq(cq_mutex_);
  if (!can_send()) {
    cq.unlock();
    if (int err = wait(&DatagramSocket::can_send, nonblocking(flags), timeouts_.send_us())) return err;
    cq.lock();
  }
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
  wr.send_flags = sge.length <= dest->qp->max_inline ? IBV_SEND_INLINE : 0;
  wr.wr.ud.ah = dest->ah;
  wr.wr.ud.remote_qpn = dest->binding.qpn();
  wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
  if (int err = ibv_post_send(dest->qp->id->qp, &wr, &bad)) {
    free_slots_.push_back(slot);
    ++sqe_avail_;
    return err > 0 ? -err : err;
  }
  dest->last_post = ++posts_;
  return static_cast<ssize_t>(len);
}

ssize_t DatagramSocket::send(const void* buf, size_t len, int flags) {
  if (!buf && len) return -EFAULT;
  LockGuard lock(send_mutex_);
  if (conn_plain_) return send_plain(buf, len, flags, nullptr, 0);
  if (!conn_dest_) return -EDESTADDRREQ;  // rdma-core 44: a NULL dereference
  Dest* dest = conn_dest_;
  if (answer_plain(dest->addr)) return send_plain(buf, len, flags, nullptr, 0);
  // Also over UDP: the peer's service forwards it as one UD message.
  if (len > dest->qp->max_payload()) return -EMSGSIZE;
  if (dest->over_udp()) return send_udp(dest, buf, len, flags, wire::Op::data);
  return send_ud(dest, dest->qp->hdr, buf, len, flags);
}

// As UDP: no address on a connected socket sends to its peer; an address
// on one sends there, and the peer stays the peer (rdma-core 44 makes the
// last address the peer, even on an unconnected socket).
ssize_t DatagramSocket::send_to(const void* buf, size_t len, int flags, const sockaddr* dst,
                                socklen_t dst_len) {
  if (!dst && !dst_len) return send(buf, len, flags);
  if (!buf && len) return -EFAULT;
  Addr key;
  if (int err = to_key(dst, dst_len, &key)) return err;
  // The kernel binds an unbound socket at its first send; the service then
  // reads the answers.
  if (int err = init_endpoint()) return err;
  LockGuard lock(send_mutex_);
  if (plain_path(key) || answer_plain(key)) return send_plain(buf, len, flags, dst, dst_len);
  // One slot holds the header and the payload (rdma-core 44 copies past
  // the slot); the QP's port may allow less (its MTU: checked below).
  size_t room = wire::kDsSlotSize - (key.sa.sa_family == AF_INET ? wire::kDsIpv4HeaderLength
                                                                 : wire::kDsIpv6HeaderLength);
  if (len > room || !last_dest_ || std::memcmp(&key, &last_dest_->addr, sizeof(key))) {
    Dest* d;
    int err = get_dest(dst, dst_len, &d);
    // No RDMA device has the address we would send from: as the kernel's.
    if (err == -ENODEV) return send_plain(buf, len, flags, dst, dst_len);
    if (len > room) return -EMSGSIZE;
    if (err) return err;
    last_dest_ = d;
  }
  Dest* dest = last_dest_;
  // Also over UDP: the peer's service forwards it as one UD message.
  if (len > dest->qp->max_payload()) return -EMSGSIZE;
  if (dest->over_udp()) return send_udp(dest, buf, len, flags, wire::Op::data);
  return send_ud(dest, dest->qp->hdr, buf, len, flags);
}

int DatagramSocket::shutdown(int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return -EINVAL;
  return ::shutdown(fd_, how) ? -errno : 0;
}

// As rdma-core 44's ds_shutdown: stop the service, then wait for our sends.
void DatagramSocket::release(std::unique_ptr<File>) {
  {
    LockGuard lock(init_mutex_);
    if (in_service_) {
      unwatch_udp(&udp_watch_);
      unwatch_udp(&cm_watch_);
    }
    in_service_ = false;
  }
  readable_ = writable_ = false;
  if (endpoint_ && !qps_.empty()) wait(&DatagramSocket::all_sends_done, false);
}

// The UDP socket's names, through our own memory: the caller's pointers are
// checked as the kernel checks them (caller_memory.h), never read by libc's
// wrappers (a sanitizer's interceptor reads *len before the call).
int DatagramSocket::peer_name(sockaddr* addr, socklen_t* len) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &n)) return -errno;
  return give_addr(&a, n, addr, len);
}

int DatagramSocket::sock_name(sockaddr* addr, socklen_t* len) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n)) return -errno;
  return give_addr(&a, n, addr, len);
}

int DatagramSocket::set_flags(int flags) {
  // Our CQ channels are never slept on directly (epoll is), so only the
  // flag changes: blocking calls sleep in epoll_wait unless it is set.
  fd_flags_ = flags;
  return 0;
}

// As rdma-core 44's: everything but SOL_RDMA reaches the UDP socket first; the
// buffer sizes and queue sizes are ours (until the first QP exists).
int DatagramSocket::set_option(int level, int name, const void* value, socklen_t len) {
  if (level == SOL_RDMA && (name == RDMA_IOMAPSIZE || name == RDMA_ROUTE)) {
    // A stream's options: taken and unused until the first QP, as rdma-core
    // 44 takes them (so one list of options fits every rsocket).
    int v;
    if (name == RDMA_IOMAPSIZE) {
      if (int err = read_int(value, len, &v)) return err;
    } else if (!value) {
      return -EFAULT;
    }
    LockGuard lock(init_mutex_);
    return endpoint_ ? -EINVAL : 0;
  }
  if (level != SOL_RDMA) {
    if (::setsockopt(fd_, level, name, value, len)) return -errno;
    if (level != SOL_SOCKET || (name != SO_RCVBUF && name != SO_SNDBUF)) return 0;
  }
  int v;
  if (int err = read_int(value, len, &v)) return err;
  LockGuard lock(init_mutex_);  // the sizes' lock until init_endpoint fixes them
  if (level == SOL_SOCKET) {
    if (!endpoint_) sizes_.set(level, name, v);  // as rdma-core 44: until the first QP
    return 0;
  }
  if (endpoint_) return -EINVAL;
  // As rdma-core 44's: taken, and nothing on a datagram socket uses them
  // (no iomap; a route per destination, resolved as it is first used), so
  // that one set of options applies to every rsocket.
  if (name == RDMA_IOMAPSIZE || name == RDMA_ROUTE) return 0;
  return sizes_.set(level, name, v) ? 0 : -ENOTSUP;
}

int DatagramSocket::get_option(int level, int name, void* value, socklen_t* len) {
  {
    LockGuard lock(init_mutex_);  // the sizes' lock until init_endpoint fixes them
    if (int v; sizes_.get(level, name, &v)) return write_int(value, len, v);
  }
  if (level == SOL_RDMA) return -ENOTSUP;
  socklen_t room;  // the caller's length, read as the kernel reads it
  if (int err = copy_from_caller(&room, len, sizeof(room))) return err;
  if (static_cast<int>(room) < 0) return -EINVAL;
  if (::getsockopt(fd_, level, name, value, &room)) return -errno;
  return copy_to_caller(len, &room, sizeof(room));
}

}  // namespace rdmacm::rsocket
