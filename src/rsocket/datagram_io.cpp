// Datagram rsockets' completions and receive path: every QP has a CQ of its
// own on a comp channel of its own; the channels sit in one epoll fd, which
// is what blocking calls and rpoll sleep on. The channels are non-blocking
// (only epoll is ever slept on), so a thread that lost an event to another
// never hangs in ibv_get_cq_event.
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rsocket/config.h"
#include "rsocket/datagram.h"

namespace rdmacm::rsocket {
// Under cq_mutex_. Round robin over the QPs, resuming where the last call
// stopped; a message we have no room to queue is dropped (its receive
// reposted), as a full UDP socket drops, and so is one from another source
// than a connected socket's peer, as UDP drops it.
int DatagramSocket::reap() {
  if (qps_.empty()) return 0;
  size_t n = qps_.size();
  size_t i = next_qp_ % n;
  int taken;
  do {
    taken = 0;
    for (size_t k = 0; k < n; ++k, i = (i + 1) % n) {
      Qp* qp = qps_[i].get();
      ibv_wc wc;
      if (ibv_poll_cq(qp->id->recv_cq, 1, &wc) <= 0) continue;
      ++taken;
      uint32_t offset = static_cast<uint32_t>(wc.wr_id);
      if (wc.wr_id & kRecvFlag) {
        // byte_len is the device's word: a message longer than the slot we
        // posted, or too short for a header, is dropped with the rest.
        // A connected socket takes only its peer's, as UDP's.
        if (rqe_avail_ && wc.status == IBV_WC_SUCCESS && wc.byte_len >= sizeof(ibv_grh) &&
            wc.byte_len - sizeof(ibv_grh) <= wire::kDsSlotSize &&
            valid_header(qp->rbuf + offset, wc.byte_len - sizeof(ibv_grh)) &&
            from_peer(*reinterpret_cast<const wire::DsHeader*>(qp->rbuf + offset))) {
          --rqe_avail_;
          auto length = static_cast<uint32_t>(wc.byte_len - sizeof(ibv_grh));
          rmsg_[rmsg_tail_] = {qp, offset, length, wc};
          if (++rmsg_tail_ == sizes_.rq_size + 1) rmsg_tail_ = 0;
        } else {
          post_recv(qp, offset);
        }
      } else {
        free_slots_.push_back(offset);
        ++sqe_avail_;
        if (all_sends_done()) drained_ = posts_;  // every AH sent on so far may go
      }
      if (!rqe_avail_ && sqe_avail_) {
        next_qp_ = (i + 1) % n;
        return 0;
      }
    }
  } while (taken);
  next_qp_ = i;
  return 0;
}

void DatagramSocket::arm() {
  for (auto& qp : qps_) {
    if (qp->cq_armed.exchange(true)) continue;
    ibv_req_notify_cq(qp->id->recv_cq, 0);
  }
}

// Sleeps on the epoll fd for up to ms (-1: no limit) and takes what every
// fired channel holds.
int DatagramSocket::sleep_on_cq(int ms) {
  epoll_event events[8];
  int n = epoll_wait(epfd_, events, 8, ms);
  if (n < 0) return errno == EINTR ? 0 : -errno;
  int taken = 0;
  for (int i = 0; i < n; ++i) {
    auto* qp = static_cast<Qp*>(events[i].data.ptr);
    if (!qp) {  // the plain datagrams' wake-up (datagram_plain.cpp)
      uint64_t count;
      if (::read(wake_fd_, &count, sizeof(count)) > 0) ++taken;
      continue;
    }
    ibv_cq* cq;
    void* context;
    if (ibv_get_cq_event(qp->id->recv_cq_channel, &cq, &context)) continue;  // taken meanwhile
    ibv_ack_cq_events(cq, 1);
    qp->cq_armed = false;
    ++taken;
  }
  return taken;
}

// As rdma-core 44's ds_recvfrom: one message per call, the rest of a message
// longer than len is dropped (as UDP's); the protocol's messages first, then
// plain datagrams.
ssize_t DatagramSocket::recv_from(void* buf, size_t len, int flags, sockaddr* src,
                                  socklen_t* src_len, size_t* whole) {
  if (!buf && len) return -EFAULT;
  if (src_len && !src) return -EFAULT;  // rdma-core 44 writes through it
  if (!readable_) return -EINVAL;       // never bound, connected or sent from
  LockGuard lock(recv_mutex_);  // one receiver: a message found stays
  UniqueLock cq(cq_mutex_);
  if (!have_data()) {
    cq.unlock();
    if (int err = wait(&DatagramSocket::have_data, nonblocking(flags), timeouts_.receive_us())) return err;
    cq.lock();
  }
  // Plain datagrams when no protocol message waits (datagram_plain.cpp).
  size_t size_of = 0;
  if (!whole) whole = &size_of;
  if (rmsg_head_ == rmsg_tail_) return take_plain(buf, len, flags, src, src_len, whole);
  Received& m = rmsg_[rmsg_head_];
  const uint8_t* slot = m.qp->rbuf + m.offset;
  const auto* hdr = reinterpret_cast<const wire::DsHeader*>(slot);
  *whole = m.length - hdr->length;
  len = std::min<size_t>(len, *whole);
  if (len) std::memcpy(buf, slot + hdr->length, len);
  Addr a = decode_header(*hdr);
  socklen_t size = sockaddr_len(a.sa.sa_family);
  if (src && src_len) {
    std::memcpy(src, &a, std::min(*src_len, size));
    *src_len = size;
  }
  if (!(flags & MSG_PEEK)) {
    Received taken = m;
    ibv_grh grh;
    std::memcpy(&grh, grh_of(m.qp, m.offset), sizeof(grh));
    post_recv(m.qp, m.offset);
    if (++rmsg_head_ == sizes_.rq_size + 1) rmsg_head_ = 0;
    ++rqe_avail_;
    cq.unlock();
    if (dests_unsettled_ > 0) heard_from(a, taken.qp, taken.wc, grh);
  }
  return static_cast<ssize_t>(flags & MSG_TRUNC ? *whole : len);
}

bool DatagramSocket::from_peer(const wire::DsHeader& hdr) const {
  if (!connected_) return true;
  Addr a = decode_header(hdr);
  if (a.sa.sa_family != conn_addr_.sa.sa_family) return false;
  if (a.sa.sa_family == AF_INET)
    return a.sin.sin_port == conn_addr_.sin.sin_port &&
           a.sin.sin_addr.s_addr == conn_addr_.sin.sin_addr.s_addr;
  return a.sin6.sin6_port == conn_addr_.sin6.sin6_port &&
         !std::memcmp(&a.sin6.sin6_addr, &conn_addr_.sin6.sin6_addr, sizeof(in6_addr));
}

short DatagramSocket::poll_state(short events) {
  if (!endpoint_) {
    // Nothing to receive yet; a send would make the endpoint (as UDP's
    // socket is writable before its first send).
    return static_cast<short>(events & POLLOUT);
  }
  LockGuard lock(cq_mutex_);
  reap();
  short revents = 0;
  if ((events & POLLIN) && have_data()) revents |= POLLIN;
  if ((events & POLLOUT) && can_send()) revents |= POLLOUT;
  return revents;
}

int DatagramSocket::wait_fd() {
  arm_for_poll();
  return epfd_;
}

void DatagramSocket::consume_wakeup() { take_wakeup(); }

}  // namespace rdmacm::rsocket
