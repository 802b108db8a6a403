// A background thread that polls the fds of a set of sockets and hands each
// one that is ready to a handler: the CM services (service.cpp) and the UDP
// service of datagram sockets (datagram_service.cpp). Started on the first
// add(); never stopped. The handler runs under the set's lock, so once
// remove() returns the thread no longer touches that socket.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace rdmacm::rsocket {

template <typename S, typename Handler>
class Watcher {
 public:
  explicit Watcher(Handler on_ready) : on_ready_(std::move(on_ready)) {}

  // -errno if the thread could not be started.
  int add(S* s) {
    std::lock_guard lock(mutex_);
    if (!started_) {
      if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK)) return -errno;
      try {
        std::thread([this] { run(); }).detach();
      } catch (const std::system_error&) {
        ::close(wake_[0]);
        ::close(wake_[1]);
        return -EAGAIN;
      }
      started_ = true;
    }
    sockets_.push_back(s);
    wake();
    return 0;
  }

  void remove(S* s) {
    std::lock_guard lock(mutex_);
    std::erase(sockets_, s);
    if (started_) wake();
  }

 private:
  void wake() {
    char c = 0;
    if (::write(wake_[1], &c, 1) < 0) {
      // Full pipe: a wake-up is pending anyway.
    }
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        fds.assign(1, pollfd{wake_[0], POLLIN, 0});
        for (S* s : sockets_) fds.push_back(pollfd{s->fd(), POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) {
        char buf[64];
        while (::read(wake_[0], buf, sizeof(buf)) > 0) {
        }
      }
      std::lock_guard lock(mutex_);
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto it = std::find_if(sockets_.begin(), sockets_.end(),
                               [&](S* s) { return s->fd() == fds[i].fd; });
        if (it == sockets_.end()) continue;  // removed meanwhile
        try {
          on_ready_(*it);
        } catch (...) {  // out of memory: the next wake-up tries again
        }
      }
    }
  }

  Handler on_ready_;
  std::mutex mutex_;
  std::vector<S*> sockets_;
  int wake_[2] = {-1, -1};
  bool started_ = false;
};

}  // namespace rdmacm::rsocket
