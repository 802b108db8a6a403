#include "core/objects.h"

#include <unistd.h>

#include <chrono>

namespace rdmacm {

EventChannel::~EventChannel() {
  if (pub.fd >= 0) ::close(pub.fd);
}

void EventTally::done() {
  std::lock_guard lock(mutex_);
  ++done_;
  cv_.notify_all();
}

void EventTally::wait(uint32_t reported, const std::function<void()>& on_stall) {
  constexpr auto kStall = std::chrono::seconds(5);
  std::unique_lock lock(mutex_);
  auto counted = [&] { return done_ >= reported; };
  if (cv_.wait_for(lock, kStall, counted)) return;
  if (on_stall) {
    lock.unlock();
    on_stall();
    lock.lock();
  }
  cv_.wait(lock, counted);
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
