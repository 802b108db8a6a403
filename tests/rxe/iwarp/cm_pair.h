// A listener and a client in one process, each on its own event channel,
// for cm_table's cases: the steps every case takes, each printed (cm_print.h)
// so that what a library answers at any step is compared.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>

namespace iwt {

// The device's address ($RXE_IP) with this port.
sockaddr_in device_addr(uint16_t port);

// The channel's next event within 5 s (nullptr on timeout); not acknowledged.
rdma_cm_event* wait_event(rdma_event_channel* ch);
// The next event printed (private data against `seed`) and acknowledged;
// its type, or -1 if none came. A connection request's new id goes to *req.
int take_event(const char* who, rdma_event_channel* ch, uint8_t seed, rdma_cm_id** req = nullptr);

// Small RC QP attributes (the library makes the CQs).
ibv_qp_init_attr rc_attr();

struct Pair {
  rdma_event_channel* sch = nullptr;  // the listener's and its requests'
  rdma_event_channel* cch = nullptr;
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* client = nullptr;
  rdma_cm_id* server = nullptr;  // from the connection request
  bool connected = false;

  // Listener bound to the device's address on `port` and listening; client
  // resolved to it (address and route) from `client_port` (0: the kernel's
  // choice). false if a step failed (printed).
  bool open(uint16_t port, rdma_port_space ps = RDMA_PS_TCP, uint16_t client_port = 0);
  // The usual connection: client QP (unless it has one), connect with cparam, the request
  // (printed), server QP, accept with aparam, both ESTABLISHED (printed).
  // Private data seeds: 0x11 the client's, 0x22 the server's.
  bool connect(rdma_conn_param* cparam, rdma_conn_param* aparam);
  // Client disconnects, both see DISCONNECTED (printed if loud); then QPs,
  // ids and channels are destroyed.
  void close(bool loud = false);
};

}  // namespace iwt
