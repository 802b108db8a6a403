#include "rsocket/stream_service.h"

#include <chrono>

#include "rsocket/service_thread.h"
#include "rsocket/stream.h"

namespace rdmacm::rsocket {
namespace {

using Service = ServiceThread<StreamSocket>;
using Clock = Service::Clock;
enum TimerKind { kKeepalive, kLinger, kAcceptDeadline, kSendRingIdle };

// Never destroyed: their threads outlive static destruction.
Service& listeners() {
  static auto* s = new Service([](StreamSocket* s) { s->accept_requests(); });
  return *s;
}

Service& connections() {
  static auto* s = new Service([](StreamSocket* s) { s->handle_cm_event(); },
                               [](StreamSocket* s, int kind) {
                                 if (kind == kAcceptDeadline) {
                                   s->accept_timed_out();  // may delete s
                                   return Clock::time_point{};
                                 }
                                 if (kind == kSendRingIdle)
                                   return s->shrink_idle_send_ring()
                                              ? Clock::now() + std::chrono::milliseconds(kSendRingIdleMs)
                                              : Clock::time_point{};
                                 s->send_keepalive();
                                 return Clock::now() + std::chrono::seconds(s->keepalive_interval());
                               });
  return *s;
}

// Closed sockets waiting for their peer's end (StreamSocket::close). The
// service owns them: nothing cancels these timers.
Service& lingerer() {
  static auto* s = new Service(nullptr, [](StreamSocket* s, int) {
    if (!s->linger_done()) return Clock::now() + std::chrono::milliseconds(2);
    s->finish_close();
    delete s;
    return Clock::time_point{};
  });
  return *s;
}

}  // namespace

std::unique_ptr<StreamSocket> linger_close(std::unique_ptr<StreamSocket> s) {
  if (lingerer().schedule(s.get(), kLinger, Clock::now())) return s;
  s.release();  // the lingerer's now: its timer deletes it
  return nullptr;
}

int watch(Watch which, StreamSocket* s) {
  switch (which) {
    case Watch::listeners:
      return listeners().watch(s);
    case Watch::connections:
      return connections().watch(s);
    case Watch::keepalive:
      return connections().schedule(s, kKeepalive,
                                    Clock::now() + std::chrono::seconds(s->keepalive_interval()));
    case Watch::accept_deadline:
      return connections().schedule(
          s, kAcceptDeadline, Clock::now() + std::chrono::milliseconds(kAcceptTimeoutMs));
    case Watch::send_ring_idle:
      return connections().schedule(s, kSendRingIdle,
                                    Clock::now() + std::chrono::milliseconds(kSendRingIdleMs));
  }
  return -EINVAL;
}

void unwatch(Watch which, StreamSocket* s) {
  switch (which) {
    case Watch::listeners:
      return listeners().unwatch(s);
    case Watch::connections:
      return connections().unwatch(s);
    case Watch::keepalive:
      return connections().cancel(s, kKeepalive);
    case Watch::accept_deadline:
      return connections().cancel(s, kAcceptDeadline);
    case Watch::send_ring_idle:
      return connections().cancel(s, kSendRingIdle);
  }
}

}  // namespace rdmacm::rsocket
