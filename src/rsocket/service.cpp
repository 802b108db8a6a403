#include "rsocket/service.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "rsocket/stream.h"

namespace rdmacm::rsocket {
namespace {

class Service {
 public:
  explicit Service(Watch which) : which_(which) {}

  int add(StreamSocket* s) {
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

  // Processing happens under mutex_: once this returns, s is not touched.
  void remove(StreamSocket* s) {
    std::lock_guard lock(mutex_);
    std::erase(sockets_, s);
    wake();
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
        for (StreamSocket* s : sockets_) fds.push_back(pollfd{s->fd(), POLLIN, 0});
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
                               [&](StreamSocket* s) { return s->fd() == fds[i].fd; });
        if (it == sockets_.end()) continue;  // removed meanwhile
        try {
          if (which_ == Watch::listeners)
            (*it)->accept_requests();
          else
            (*it)->handle_cm_event();
        } catch (...) {  // out of memory: the next event tries again
        }
      }
    }
  }

  const Watch which_;
  std::mutex mutex_;
  std::vector<StreamSocket*> sockets_;
  int wake_[2] = {-1, -1};
  bool started_ = false;
};

Service& service(Watch which) {
  // Never destroyed: their threads outlive static destruction.
  static auto* listeners = new Service(Watch::listeners);
  static auto* connections = new Service(Watch::connections);
  return which == Watch::listeners ? *listeners : *connections;
}

}  // namespace

int watch(Watch which, StreamSocket* s) { return service(which).add(s); }
void unwatch(Watch which, StreamSocket* s) { service(which).remove(s); }

}  // namespace rdmacm::rsocket
