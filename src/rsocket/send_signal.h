// Which data messages are signalled (stream_queue.cpp posts them): a
// completion costs the device and the poller work, so one in kSignalEvery
// is, and every one that leaves the send queue or the send buffer half used
// or more, or takes the last control slot. Past half, each write is
// signalled, so that the completion of an earlier write frees room while the
// later ones are still on the wire: with a 128 KiB send buffer and 64 KiB
// writes, signalling only the one that fills the buffer made the sender wait
// for both: traced through the preload under iperf3 -l 64K, every refill
// began with the whole buffer free (the pipeline drained once per buffer).
#pragma once

#include <cstdint>

namespace rdmacm::rsocket {

inline constexpr int kSignalEvery = 64;

struct SendRoom {
  int quiet_wrs;       // quiet WRs posted since the last signalled one, this one included
  int sqe_avail;       // send queue entries left after this one
  int sq_size;
  int sbuf_avail;      // send buffer bytes left after this one
  uint32_t sbuf_size;
  bool ctrl_free;      // a control slot is still free
};

inline bool signal_data(const SendRoom& r) {
  return r.quiet_wrs >= kSignalEvery || r.sqe_avail <= r.sq_size / 2 ||
         r.sbuf_avail <= static_cast<int>(r.sbuf_size / 2) || !r.ctrl_free;
}

}  // namespace rdmacm::rsocket
