// An rsocket: what every r* call finds behind its fd. One interface, with
// the stream (RC) implementation in stream*.cpp and the datagram (UD) one in
// datagram*.cpp; calls a socket type does not
// support answer as rdma-core's do.
//
// Every call returns >= 0 or -errno (never throws across the C boundary:
// api/rsockets.cpp converts). Locks, in the order they may be taken:
// send_mutex / recv_mutex (one sender, one receiver at a time) before
// cq_mutex (polling the CQ and the state it updates); cq_wait_mutex
// serialises sleeping on the CQ's channel and is never held with cq_mutex.
#pragma once

#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace rdmacm::rsocket {

class Socket {
 public:
  virtual ~Socket() = default;

  // The fd the application knows this socket by.
  int fd() const { return fd_; }

  virtual int bind(const sockaddr* addr, socklen_t len) = 0;
  virtual int listen(int backlog) = 0;
  // Returns the new socket's fd.
  virtual int accept(sockaddr* addr, socklen_t* len) = 0;
  virtual int connect(const sockaddr* addr, socklen_t len) = 0;
  virtual ssize_t recv(void* buf, size_t len, int flags) = 0;
  virtual ssize_t send(const void* buf, size_t len, int flags) = 0;
  // With an address: a datagram socket's destination and source. A stream
  // ignores dst, as TCP does, and names its peer as the source.
  virtual ssize_t send_to(const void* buf, size_t len, int flags, const sockaddr*, socklen_t) {
    return send(buf, len, flags);
  }
  virtual ssize_t recv_from(void* buf, size_t len, int flags, sockaddr* src, socklen_t* src_len) {
    ssize_t n = recv(buf, len, flags);
    if (n > 0 && src && src_len) peer_name(src, src_len);
    return n;
  }
  // A datagram socket sends and receives whole messages: a vector of
  // buffers is one message, not one per buffer.
  virtual bool message_oriented() const { return false; }
  virtual int shutdown(int how) = 0;
  // Tears the connection down (rclose). The socket is gone from the fd table
  // when this returns; the caller deletes it, unless it returned false: then
  // it lingers and deletes itself.
  virtual bool close() = 0;
  virtual int peer_name(sockaddr* addr, socklen_t* len) = 0;
  virtual int sock_name(sockaddr* addr, socklen_t* len) = 0;
  virtual int set_option(int level, int name, const void* value, socklen_t len) = 0;
  virtual int get_option(int level, int name, void* value, socklen_t* len) = 0;
  // riomap / riounmap / riowrite (direct placement into the peer's mapped
  // buffers); sockets without them answer as rdma-core's datagram ones.
  virtual off_t iomap(void*, size_t, int, int, off_t) { return -EINVAL; }
  virtual int iounmap(void*, size_t) { return -EINVAL; }
  virtual ssize_t iowrite(const void*, size_t, off_t, int) { return -EINVAL; }
  int flags() const { return fd_flags_; }
  virtual int set_flags(int flags) = 0;

  // rpoll's view. poll_state answers events ready now, after processing
  // what completed (never sleeping); wait_fd is the fd to sleep on when
  // nothing is (armed first); consume_wakeup is called when that fd fired.
  virtual short poll_state(short events) = 0;
  virtual int wait_fd() = 0;
  virtual void consume_wakeup() = 0;

  // repoll's EPOLLET: a send that found no room (-EAGAIN) makes the next
  // room news (the kernel's SOCK_NOSPACE). calls.cpp passes every send's
  // result through sent(); repoll takes the mark when it reports room.
  ssize_t sent(ssize_t r) {
    if (r == -EAGAIN) send_blocked_.store(true, std::memory_order_relaxed);
    return r;
  }
  bool take_send_blocked() { return send_blocked_.exchange(false, std::memory_order_relaxed); }

 protected:
  int fd_ = -1;
  int fd_flags_ = 0;

 private:
  std::atomic<bool> send_blocked_{false};
};

// Wakes every thread sleeping in rpoll/rselect to re-check its sockets (a
// socket's state changed behind their back: see poll.cpp).
void signal_pollers();

}  // namespace rdmacm::rsocket
