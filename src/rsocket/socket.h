// An rsocket: the file (file.h) behind most fds of the wing, with the socket
// operations (the kernel's proto_ops). One interface, with the stream (RC)
// implementation in stream*.cpp and the datagram (UD) one in datagram*.cpp;
// what a type does not support has a named default here, answering as
// rdma-core 44's does (the kernel's sock_no_*).
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

#include "rsocket/file.h"
#include "rsocket/timeouts.h"

namespace rdmacm::rsocket {

class Socket : public File {
 public:
  virtual int bind(const sockaddr* addr, socklen_t len) = 0;
  // Not a listening kind (sock_no_listen / sock_no_accept).
  virtual int listen(int) { return -EOPNOTSUPP; }
  // Returns the new socket's fd.
  virtual int accept(sockaddr*, socklen_t*) { return -EOPNOTSUPP; }
  virtual int connect(const sockaddr* addr, socklen_t len) = 0;
  // The primitives every send and receive call wraps (the kernel's sendmsg
  // and recvmsg). msg_iov: the buffers, a stream's in turn, a datagram's one
  // message (message.h). sendmsg's msg_name / msg_namelen: the destination
  // (a datagram's; none: the connected peer; a stream ignores it, as TCP).
  // recvmsg's: where the source goes and its room (none: not wanted); a
  // datagram sets msg_namelen to its source's size, a stream, which has no
  // source per message, to 0. msg_control and msg_flags are not looked at.
  virtual ssize_t sendmsg(const msghdr& msg, int flags) = 0;
  virtual ssize_t recvmsg(msghdr& msg, int flags) = 0;
  virtual int shutdown(int how) = 0;
  virtual int peer_name(sockaddr* addr, socklen_t* len) = 0;
  virtual int sock_name(sockaddr* addr, socklen_t* len) = 0;
  virtual int set_option(int level, int name, const void* value, socklen_t len) = 0;
  virtual int get_option(int level, int name, void* value, socklen_t* len) = 0;
  // riomap / riounmap / riowrite (direct placement into the peer's mapped
  // buffers); sockets without them answer as rdma-core 44's datagram ones.
  virtual off_t iomap(void*, size_t, int, int, off_t) { return -EINVAL; }
  virtual int iounmap(void*, size_t) { return -EINVAL; }
  virtual ssize_t iowrite(const void*, size_t, off_t, int) { return -EINVAL; }

  // repoll's EPOLLET: a send that found no room (-EAGAIN) makes the next
  // room news (the kernel's SOCK_NOSPACE). Every send call passes its result
  // through sent() in one place (calls.cpp's send_on); repoll takes the mark
  // when it reports room.
  ssize_t sent(ssize_t r) {
    if (r == -EAGAIN) send_blocked_.store(true, std::memory_order_relaxed);
    return r;
  }
  bool take_send_blocked() { return send_blocked_.exchange(false, std::memory_order_relaxed); }

  // SO_RCVTIMEO / SO_SNDTIMEO, the same for every kind (calls.cpp sets and
  // reads them; the blocking waits of each kind are bounded by them).
  Timeouts& timeouts() { return timeouts_; }

 protected:
  Timeouts timeouts_;

 protected:
  Socket() : File(Kind::socket) {}

 private:
  std::atomic<bool> send_blocked_{false};
};

// The socket behind a file, if it is one (the kernel's sock_from_file).
inline Socket* socket_of(File* f) {
  return f && f->kind() == File::Kind::socket ? static_cast<Socket*>(f) : nullptr;
}

}  // namespace rdmacm::rsocket
