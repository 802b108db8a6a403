// A stream connection's endpoint apart from its id: the queue pair, the
// receive buffer (the peer's window) with the target SGL the peer writes its
// grants into, control slots where inline sends are too short for a control
// message, and the send ring. Made as a socket connects or accepts, or ahead
// of it (endpoint_spares.h): nothing here depends on the connection.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "rsocket/growing_buffer.h"
#include "rsocket/protocol.h"
#include "rsocket/queue_pair.h"
#include "rsocket/sizes.h"

namespace rdmacm::rsocket {

// What an endpoint is made for: two with equal shapes are interchangeable.
struct EndpointShape {
  ibv_pd* pd;
  Sizes sizes;  // the queues fitted to the device; sq_inline as asked
  uint32_t iomap_size;
  bool msg_send;  // iWARP: each message a SEND with its own receive slot

  bool operator==(const EndpointShape& o) const;
  size_t rbuf_total() const;  // the receive buffer with the message slots
  size_t target_len() const;  // the target SGL with the iomap
};

// The queues a connection keeps in use at first (sends outstanding, receives
// posted, both within the QP's configured depths: ones that cannot grow
// later), and a CQ for just as many; the socket deepens them as its traffic
// asks (stream_queue.cpp), to the configured depths. On iWARP (a SEND that
// finds no receive ends the connection) or a device whose CQs do not resize:
// the configured depths from the start.
constexpr uint16_t kStartSendDepth = 64;
constexpr uint16_t kStartRecvDepth = 32;

// A stream connection's QP holds at most this many sends and receives
// unless a depth was asked for (Sizes::*_asked), not rdma-core's 384: rxe
// maps a QP's rings into the process whole, slots a power of two past the
// depth (the send ring, 512 bytes a slot for rsockets' 2 SGEs and 64 inline
// bytes: 256 KiB at 384, 64 KiB at 127; the receive ring 32 KiB and 8 KiB),
// and sends wait for credits and the send buffer long before they wait for
// this.
constexpr uint16_t kUnaskedDepth = 127;

struct Endpoint {
  QueuePair qp;             // until the id takes it (attach_queue_pair)
  uint16_t sq_depth = 0, rq_depth = 0;  // in use at first: their sum is the CQ's entries
  uint16_t sq_max = 0, rq_max = 0;  // the QP's queues: the deepest sq_depth, rq_depth may grow
  uint16_t sq_inline = 0;   // what the device granted
  uint8_t* rbuf = nullptr;  // rbuf_total() bytes
  ibv_mr* rmr = nullptr;
  wire::Sge* target_sgl = nullptr;  // kTargetSglSize entries the peer writes, then the iomap
  ibv_mr* target_mr = nullptr;
  uint8_t* ctrl_slots = nullptr;  // only when sq_inline < kMaxCtrlMessage
  ibv_mr* ctrl_mr = nullptr;
  GrowingBuffer sbuf;

  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  // Moves swap: what the target held goes to the source.
  Endpoint(Endpoint&& o) noexcept { swap(o); }
  Endpoint& operator=(Endpoint&& o) noexcept {
    swap(o);
    return *this;
  }
  // Frees all that is left (deregister() first if not done).
  ~Endpoint();

  // Lets go of every registration (the memory stays until destruction): a
  // socket's teardown, before its QP goes.
  void deregister();

 private:
  void swap(Endpoint& o) noexcept;
};

// 0 or -errno; on failure *out holds what was made (its destructor frees it).
// ahead: made in the background, before any socket wants it.
int make_endpoint(const EndpointShape& shape, Endpoint* out, bool ahead = false);

}  // namespace rdmacm::rsocket
