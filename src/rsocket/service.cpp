#include "rsocket/service.h"

#include "rsocket/stream.h"
#include "rsocket/watcher.h"

namespace rdmacm::rsocket {
namespace {

using CmWatcher = Watcher<StreamSocket, void (*)(StreamSocket*)>;

CmWatcher& service(Watch which) {
  // Never destroyed: their threads outlive static destruction.
  static auto* listeners = new CmWatcher([](StreamSocket* s) { s->accept_requests(); });
  static auto* connections = new CmWatcher([](StreamSocket* s) { s->handle_cm_event(); });
  return which == Watch::listeners ? *listeners : *connections;
}

}  // namespace

int watch(Watch which, StreamSocket* s) { return service(which).add(s); }
void unwatch(Watch which, StreamSocket* s) { service(which).remove(s); }

}  // namespace rdmacm::rsocket
