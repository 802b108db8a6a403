// Live objects handed to the application, keyed by the public pointer.
//
// Every entry point validates the pointer it is given here before touching it,
// so a stale, foreign or doubly freed handle yields EINVAL instead of a crash.
// Lookups hand out shared ownership: an object stays alive while a call that
// found it is still running, even if another thread destroys it meanwhile.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace rdmacm::core {

template <typename Public, typename Owner>
class Registry {
 public:
  void add(const Public* key, std::shared_ptr<Owner> owner) {
    std::lock_guard lock(mutex_);
    live_[key] = std::move(owner);
  }

  std::shared_ptr<Owner> find(const Public* key) const {
    if (!key) return nullptr;
    std::lock_guard lock(mutex_);
    auto it = live_.find(key);
    return it == live_.end() ? nullptr : it->second;
  }

  // Removes and returns the entry; nullptr if it was not live (e.g. a second
  // destroy racing the first).
  std::shared_ptr<Owner> take(const Public* key) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(key);
    if (it == live_.end()) return nullptr;
    auto owner = std::move(it->second);
    live_.erase(it);
    return owner;
  }

  // Removes the entry only if it is still this owner's (a key such as a
  // kernel handle may have been reused by a newer owner meanwhile).
  void take_if(const Public* key, const Owner* expected) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(key);
    if (it != live_.end() && it->second.get() == expected) live_.erase(it);
  }

  // Calls f(key, owner) for every live entry, under the table's lock.
  template <typename F>
  void for_each(F&& f) const {
    std::lock_guard lock(mutex_);
    for (const auto& [key, owner] : live_) f(key, *owner);
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return live_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const Public*, std::shared_ptr<Owner>> live_;
};

}  // namespace rdmacm::core

namespace rdmacm::core {

// Plain pointers the library handed out (malloc'd lists, address infos), so
// that freeing a foreign or already freed pointer is refused, not executed.
template <typename T>
class PointerSet {
 public:
  void add(T* p) {
    std::lock_guard lock(mutex_);
    live_.insert(p);
  }
  // True if p was live (and is no longer).
  bool take(T* p) {
    std::lock_guard lock(mutex_);
    return live_.erase(p) != 0;
  }

 private:
  std::mutex mutex_;
  std::unordered_set<T*> live_;
};

}  // namespace rdmacm::core
