// The one mechanism behind every background thread of the wing: a thread,
// started on first use and never stopped (it outlives static destruction),
// that runs on_ready(s) for each watched socket whose fd became readable,
// and on_due(s, kind) for each timer that fell due. Users: the CM services
// and the timers of stream sockets (stream_service.cpp), the UDP service of
// datagram sockets (datagram_service.cpp).
//
// The watched fds sit in an epoll set of the service's, one-shot and tagged
// with the watch's generation: a wait costs the fds that fired, not a scan
// of every watched one (a process holding 2,048 connections accepted new
// ones at half the rate of its first 256 while the thread polled them all).
// An event of a watch that ended (unwatched meanwhile, or its fd number
// watched anew) is dropped by its tag, and, one-shot, comes at most once; a
// live one is armed again after its on_ready.
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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "rsocket/kernel_fds.h"

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
    int fd = s->fd();
    uint32_t gen = ++next_gen_;
    auto it = watched_.insert_or_assign(fd, Watched{s, gen}).first;
    epoll_event ev{EPOLLIN | EPOLLONESHOT, {.u64 = tag(fd, gen)}};
    if (kernel_epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) &&
        (errno != EEXIST || kernel_epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev))) {
      int err = -errno;
      watched_.erase(it);
      return err;
    }
    return 0;
  }

  void unwatch(S* s) {
    LockGuard lock(mutex_);
    int fd = s->fd();
    if (auto it = watched_.find(fd); it != watched_.end() && it->second.s == s) {
      watched_.erase(it);
      kernel_epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
    }
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
  struct Watched {
    S* s;
    uint32_t gen;
  };
  static constexpr uint64_t kWake = ~0ull;
  static uint64_t tag(int fd, uint32_t gen) { return uint64_t{gen} << 32 | static_cast<uint32_t>(fd); }

  typename std::vector<Timer>::iterator find_timer(S* s, int kind) REQUIRES(mutex_) {
    return std::find_if(timers_.begin(), timers_.end(),
                        [&](const Timer& t) { return t.s == s && t.kind == kind; });
  }

  bool on_service_thread() const REQUIRES(mutex_) {
    return started_ && std::this_thread::get_id() == thread_id_;
  }

  int start() REQUIRES(mutex_) {
    if (started_) return 0;
    // Both out of the numbers a program counts on (move_high).
    wake_ = move_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    epfd_ = move_high(kernel_epoll());
    epoll_event ev{EPOLLIN, {.u64 = kWake}};
    if (wake_ < 0 || epfd_ < 0 || kernel_epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_, &ev)) {
      int err = -errno;
      if (epfd_ >= 0) ::close(epfd_);
      if (wake_ >= 0) ::close(wake_);
      epfd_ = wake_ = -1;
      return err;
    }
    try {
      std::thread t([this] { run(); });
      thread_id_ = t.get_id();
      t.detach();
    } catch (const std::system_error&) {
      ::close(epfd_);
      ::close(wake_);
      epfd_ = wake_ = -1;
      return -EAGAIN;
    }
    started_ = true;
    return 0;
  }

  void wake() {
    uint64_t one = 1;
    if (::write(wake_, &one, sizeof(one)) < 0) {
      // Full: a wake-up is pending anyway.
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
    epoll_event events[64];
    for (;;) {
      int timeout;
      {
        LockGuard lock(mutex_);
        timeout = next_timeout();
      }
      int n = kernel_epoll_wait(epfd_, events, 64, timeout);
      LockGuard lock(mutex_);
      for (int i = 0; i < n; ++i) {
        uint64_t t = events[i].data.u64;
        if (t == kWake) {
          uint64_t count;
          if (::read(wake_, &count, sizeof(count)) < 0) {
            // Emptied already.
          }
          continue;
        }
        int fd = static_cast<int>(static_cast<uint32_t>(t));
        auto it = watched_.find(fd);
        if (it == watched_.end() || it->second.gen != t >> 32) continue;  // unwatched meanwhile
        S* s = it->second.s;
        running_ready_ = s;
        mutex_.unlock();
        try {
          on_ready_(s);
        } catch (...) {  // out of memory: the next wake-up tries again
        }
        mutex_.lock();
        running_ready_ = nullptr;
        done_.notify_all();
        // Armed again unless unwatched (or watched anew) while it ran.
        it = watched_.find(fd);
        if (it != watched_.end() && it->second.gen == t >> 32) {
          epoll_event ev{EPOLLIN | EPOLLONESHOT, {.u64 = t}};
          kernel_epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
        }
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
  std::unordered_map<int, Watched> watched_ GUARDED_BY(mutex_);  // by fd
  uint32_t next_gen_ GUARDED_BY(mutex_) = 0;
  std::vector<Timer> timers_ GUARDED_BY(mutex_);
  S* running_ready_ GUARDED_BY(mutex_) = nullptr;  // the socket whose on_ready runs now
  Timer running_ GUARDED_BY(mutex_){};  // the timer whose on_due runs now (s null: none)
  bool running_cancelled_ GUARDED_BY(mutex_) = false;
  int wake_ = -1;  // an eventfd; set once under mutex_ before the thread starts
  int epfd_ = -1;  // the same
  bool started_ GUARDED_BY(mutex_) = false;
  std::thread::id thread_id_ GUARDED_BY(mutex_);
};

}  // namespace rdmacm::rsocket
