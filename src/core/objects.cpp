#include "core/objects.h"

#include <unistd.h>

namespace rdmacm {

EventChannel::~EventChannel() {
  if (pub.fd >= 0) ::close(pub.fd);
}

void EventTally::done() {
  std::lock_guard lock(mutex_);
  ++done_;
  cv_.notify_all();
}

void EventTally::wait(uint32_t reported) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_ >= reported; });
}

Objects& Objects::get() {
  static Objects* objects = new Objects;
  return *objects;
}

void Objects::publish(const std::shared_ptr<CmId>& id) {
  attached.add(key(id->uid()), id);
  handles.add(handle_key(id->handle), id);
  ids.add(&id->pub, id);
}

void Objects::detach(const CmId& id) {
  attached.take_if(key(id.uid()), &id);
  handles.take_if(handle_key(id.handle), &id);
}

}  // namespace rdmacm
