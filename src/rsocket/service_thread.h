// The one mechanism behind every background thread of the wing: a thread,
// started on first use and never stopped (it outlives static destruction),
// that runs on_ready(s) for each watched socket whose fd became readable,
// and on_due(s, kind) for each timer that fell due. Users: the CM services
// and the timers of stream sockets (stream_service.cpp), the UDP service of
// datagram sockets (datagram_service.cpp).
//
// Once unwatch() or cancel() returns, the thread no longer touches that
// socket for that purpose: both run outside the service's lock, and
// unwatch() and cancel() wait for a running one to end, as the kernel's
// del_timer_sync (a timer may take a while: a lingering close). A handler
// may call the service's own methods (watch a new socket, schedule or
// cancel a timer, unwatch itself): on the service's thread nothing waits,
// as nothing else of the service runs meanwhile.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace rdmacm::rsocket {

template <typename S>
class ServiceThread {
 public:
  using Clock = std::chrono::steady_clock;
  using OnReady = void (*)(S*);
  // When the timer is due next; Clock::time_point{} to drop it.
  using OnDue = Clock::time_point (*)(S*, int kind);

  explicit ServiceThread(OnReady on_ready, OnDue on_due = nullptr)
      : on_ready_(on_ready), on_due_(on_due) {}

  // -errno if the thread could not be started.
  int watch(S* s) {
    LockGuard lock(mutex_);
    if (int err = start()) return err;
    sockets_.push_back(s);
    wake();
    return 0;
  }

  void unwatch(S* s) {
    LockGuard lock(mutex_);
    std::erase(sockets_, s);
    if (started_) wake();
    while (running_ready_ == s && !on_service_thread()) done_.wait(mutex_);
  }

  // s's timer of this kind, due at when (replacing one set before).
  int schedule(S* s, int kind, Clock::time_point when) {
    LockGuard lock(mutex_);
    if (int err = start()) return err;
    auto it = find_timer(s, kind);
    if (it == timers_.end())
      timers_.push_back({s, kind, when});
    else
      it->due = when;
    wake();
    return 0;
  }

  void cancel(S* s, int kind) {
    LockGuard lock(mutex_);
    if (auto it = find_timer(s, kind); it != timers_.end()) timers_.erase(it);
    if (running_.s == s && running_.kind == kind) running_cancelled_ = true;
    while (running_.s == s && running_.kind == kind && !on_service_thread()) done_.wait(mutex_);
  }

 private:
  struct Timer {
    S* s;
    int kind;
    Clock::time_point due;
  };

  typename std::vector<Timer>::iterator find_timer(S* s, int kind) REQUIRES(mutex_) {
    return std::find_if(timers_.begin(), timers_.end(),
                        [&](const Timer& t) { return t.s == s && t.kind == kind; });
  }

  bool on_service_thread() const REQUIRES(mutex_) {
    return started_ && std::this_thread::get_id() == thread_id_;
  }

  int start() REQUIRES(mutex_) {
    if (started_) return 0;
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK)) return -errno;
    try {
      std::thread t([this] { run(); });
      thread_id_ = t.get_id();
      t.detach();
    } catch (const std::system_error&) {
      ::close(wake_[0]);
      ::close(wake_[1]);
      return -EAGAIN;
    }
    started_ = true;
    return 0;
  }

  void wake() {
    char c = 0;
    if (::write(wake_[1], &c, 1) < 0) {
      // Full pipe: a wake-up is pending anyway.
    }
  }

  // Milliseconds until the next timer (-1: none).
  int next_timeout() const REQUIRES(mutex_) {
    if (timers_.empty()) return -1;
    auto next = std::min_element(timers_.begin(), timers_.end(),
                                 [](const Timer& a, const Timer& b) { return a.due < b.due; })
                    ->due;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 60000));
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      int timeout;
      {
        LockGuard lock(mutex_);
        fds.assign(1, pollfd{wake_[0], POLLIN, 0});
        for (S* s : sockets_) fds.push_back(pollfd{s->fd(), POLLIN, 0});
        timeout = next_timeout();
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0) continue;
      if (fds[0].revents) {
        char buf[64];
        while (::read(wake_[0], buf, sizeof(buf)) > 0) {
        }
      }
      LockGuard lock(mutex_);
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto it = std::find_if(sockets_.begin(), sockets_.end(),
                               [&](S* s) { return s->fd() == fds[i].fd; });
        if (it == sockets_.end()) continue;  // unwatched meanwhile
        S* s = *it;
        running_ready_ = s;
        mutex_.unlock();
        try {
          on_ready_(s);
        } catch (...) {  // out of memory: the next wake-up tries again
        }
        mutex_.lock();
        running_ready_ = nullptr;
        done_.notify_all();
      }
      run_due_timers();
    }
  }

  // Lets go of mutex_ while each on_due runs.
  void run_due_timers() REQUIRES(mutex_) {
    for (;;) {
      auto now = Clock::now();
      auto it = std::find_if(timers_.begin(), timers_.end(),
                             [&](const Timer& t) { return t.due <= now; });
      if (it == timers_.end()) return;
      Timer t = *it;
      timers_.erase(it);
      running_ = t;
      running_cancelled_ = false;
      mutex_.unlock();
      Clock::time_point next{};
      try {
        next = on_due_(t.s, t.kind);
      } catch (...) {  // out of memory: try again shortly
        next = now + std::chrono::milliseconds(100);
      }
      mutex_.lock();
      running_ = {};
      done_.notify_all();
      // Unless cancelled or scheduled anew while it ran.
      if (next != Clock::time_point{} && !running_cancelled_ &&
          find_timer(t.s, t.kind) == timers_.end())
        timers_.push_back({t.s, t.kind, next});
    }
  }

  const OnReady on_ready_;
  const OnDue on_due_;
  Mutex mutex_;   // held by no handler: they may call watch, schedule and the rest
  CondVar done_;  // a running on_ready or on_due ended
  std::vector<S*> sockets_ GUARDED_BY(mutex_);
  std::vector<Timer> timers_ GUARDED_BY(mutex_);
  S* running_ready_ GUARDED_BY(mutex_) = nullptr;  // the socket whose on_ready runs now
  Timer running_ GUARDED_BY(mutex_){};  // the timer whose on_due runs now (s null: none)
  bool running_cancelled_ GUARDED_BY(mutex_) = false;
  int wake_[2] = {-1, -1};  // set once under mutex_ before the thread starts
  bool started_ GUARDED_BY(mutex_) = false;
  std::thread::id thread_id_ GUARDED_BY(mutex_);
};

}  // namespace rdmacm::rsocket
