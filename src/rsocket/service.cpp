#include "rsocket/service.h"

#include <chrono>
#include <condition_variable>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

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

// Sends each watched socket's keep-alive when it is due (rdma-core's tcp
// service). send_keepalive runs under mutex_: once remove() returns the
// thread no longer touches the socket.
class Keepalive {
 public:
  int add(StreamSocket* s) {
    std::lock_guard lock(mutex_);
    if (!started_) {
      try {
        std::thread([this] { run(); }).detach();
      } catch (const std::system_error&) {
        return -EAGAIN;
      }
      started_ = true;
    }
    due_[s] = Clock::now() + std::chrono::seconds(s->keepalive_interval());
    cv_.notify_all();
    return 0;
  }
  void remove(StreamSocket* s) {
    std::lock_guard lock(mutex_);
    due_.erase(s);
  }

 private:
  using Clock = std::chrono::steady_clock;

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      auto next = Clock::time_point::max();
      for (const auto& [s, when] : due_) next = std::min(next, when);
      if (next == Clock::time_point::max())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, next);
      auto now = Clock::now();
      for (auto& [s, when] : due_) {
        if (when > now) continue;
        s->send_keepalive();
        when = now + std::chrono::seconds(s->keepalive_interval());
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<StreamSocket*, Clock::time_point> due_;
  bool started_ = false;
};

}  // namespace

// Closed sockets waiting for their peer's end (StreamSocket::release), owned
// here until finished.
class Lingerer {
 public:
  std::unique_ptr<StreamSocket> add(std::unique_ptr<StreamSocket> s) {
    std::lock_guard lock(mutex_);
    if (!started_) {
      try {
        std::thread([this] { run(); }).detach();
      } catch (const std::system_error&) {
        return s;
      }
      started_ = true;
    }
    waiting_.push_back({std::move(s), Clock::now() + std::chrono::seconds(2)});
    cv_.notify_all();
    return nullptr;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::unique_ptr<StreamSocket> s;
    Clock::time_point until;
  };

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return !waiting_.empty(); });
      std::vector<Entry> round;
      round.swap(waiting_);
      lock.unlock();
      std::vector<Entry> still;
      for (Entry& e : round) {
        bool done = true;
        try {
          done = e.s->linger_done();  // takes what completed, never sleeps
        } catch (...) {
        }
        if (!done && Clock::now() < e.until) {
          still.push_back(std::move(e));
          continue;
        }
        try {
          e.s->finish_close();
        } catch (...) {
        }
        e.s.reset();
      }
      if (!still.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      lock.lock();
      waiting_.insert(waiting_.end(), std::make_move_iterator(still.begin()),
                      std::make_move_iterator(still.end()));
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Entry> waiting_;
  bool started_ = false;
};

namespace {

Keepalive& keepalive() {
  static auto* k = new Keepalive;  // never destroyed, as the others
  return *k;
}

}  // namespace

std::unique_ptr<StreamSocket> linger_close(std::unique_ptr<StreamSocket> s) {
  static auto* lingerer = new Lingerer;  // never destroyed, as the others
  return lingerer->add(std::move(s));
}

int watch(Watch which, StreamSocket* s) {
  return which == Watch::keepalive ? keepalive().add(s) : service(which).add(s);
}
void unwatch(Watch which, StreamSocket* s) {
  if (which == Watch::keepalive)
    keepalive().remove(s);
  else
    service(which).remove(s);
}

}  // namespace rdmacm::rsocket
