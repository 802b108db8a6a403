#include "listener.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <rdma/rsocket.h>
#include <string.h>
#include <time.h>

#include <optional>

#include "deadline.h"
#include "interpose.h"
#include "trace.h"

namespace rspreload {
namespace {

// A connection the rsocket listener accepted, given to the program as a new
// placeholder.
int adopt_accepted(int rfd, int domain, int flags) {
  int nfd = make_placeholder(domain, SOCK_STREAM | flags);
  if (nfd < 0) {
    int saved = errno;
    rclose(rfd);
    return fail(saved);
  }
  if (flags & SOCK_NONBLOCK) rfcntl(rfd, F_SETFL, O_NONBLOCK);
  if (!adopt(nfd, Kind::rsocket, rfd, domain)) {
    int saved = errno;
    real::close(nfd);
    return fail(saved);
  }
  return nfd;
}

int accept_rdma(Entry* e, sockaddr* addr, socklen_t* len, int flags) {
  int rfd = raccept(e->rfd, addr, len);
  return rfd < 0 ? -1 : adopt_accepted(rfd, e->domain, flags);
}

// A kernel TCP connection is the program's as it is: an ordinary descriptor
// (a stale entry at its number, closed behind our back, is dropped).
int accept_kernel(int fd, sockaddr* addr, socklen_t* len, int flags) {
  int nfd = real::accept4(fd, addr, len, flags);
  if (nfd >= 0) {
    if (Entry* stale = unmap_fd(nfd)) release(stale);
  }
  return nfd;
}

bool would_block(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

// After a wait interrupted by a signal handler: whether the kernel would have
// restarted the accept (every handler installed has SA_RESTART, as signal()
// gives; which signal came is not known here, so one handler without it is
// enough to return EINTR, as the kernel would for that one).
bool restart_after_signal() {
  for (int sig = 1; sig < NSIG; sig++) {
    struct sigaction sa;
    if (sigaction(sig, nullptr, &sa)) continue;
    bool caught = (sa.sa_flags & SA_SIGINFO) ||
                  (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
    if (caught && !(sa.sa_flags & SA_RESTART)) return false;
  }
  return true;
}

// In a child after fork(): a listener listening on both sides is its kernel
// side from now on. Its rsocket is the parent's: left alone, not closed.
void keep_kernel_side(int, Entry* e) {
  if (e->kind.load(std::memory_order_acquire) == Kind::rsocket &&
      e->twin.load(std::memory_order_acquire)) {
    e->kind.store(Kind::kernel, std::memory_order_release);
    e->rfd = -1;
  }
}

void in_child() { for_each_entry(keep_kernel_side); }

pthread_once_t at_fork_once = PTHREAD_ONCE_INIT;

void register_at_fork() { pthread_atfork(nullptr, nullptr, in_child); }

}  // namespace

void listen_on_kernel_too(int fd, Entry* e, int backlog) {
  int saved = errno;
  if (e->twin.load(std::memory_order_acquire)) {
    real::listen(fd, backlog);
    errno = saved;
    return;
  }
  sockaddr_storage a;
  socklen_t len = sizeof a;
  char text[80];
  if ((e->domain != AF_INET && e->domain != AF_INET6) ||
      rgetsockname(e->rfd, reinterpret_cast<sockaddr*>(&a), &len) || a.ss_family != e->domain) {
    errno = saved;
    return;
  }
  addr_text(reinterpret_cast<sockaddr*>(&a), len, text);
  if (real::bind(fd, reinterpret_cast<sockaddr*>(&a), len) || real::listen(fd, backlog)) {
    trace("fd %d listens on RDMA only: kernel TCP cannot listen at %s (%s)", fd, text,
          strerror(errno));
    errno = saved;
    return;
  }
  pthread_once(&at_fork_once, register_at_fork);
  e->twin.store(true, std::memory_order_release);
  trace("fd %d listens on RDMA and on kernel TCP at %s", fd, text);
  errno = saved;
}

namespace {

// A blocking accept's bound (SO_RCVTIMEO, as accept(2)), if it has one.
std::optional<Deadline> accept_deadline(Entry* e) {
  timeval tv{};
  socklen_t tl = sizeof tv;
  if (rgetsockopt(e->rfd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) || (!tv.tv_sec && !tv.tv_usec))
    return std::nullopt;
  return Deadline::after(tv);
}

}  // namespace

int accept_listener(int fd, Entry* e, sockaddr* addr, socklen_t* len, int flags) {
  if (!e->twin.load(std::memory_order_acquire)) return accept_rdma(e, addr, len, flags);
  int fl = real::fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  bool blocking = !(fl & O_NONBLOCK);
  std::optional<Deadline> deadline;
  if (blocking) deadline = accept_deadline(e);
  // Alternating which side is looked at first: neither starves.
  bool kernel_first = e->turn.fetch_add(1, std::memory_order_relaxed) & 1;
  for (;;) {
    pollfd p[2] = {{e->rfd, POLLIN, POLLIN}, {fd, POLLIN, POLLIN}};
    if (blocking) {
      p[0].revents = p[1].revents = 0;
      int n = rpoll_as_is(p, 2, deadline ? deadline->left_ms() : -1);
      if (n < 0) {
        // A bounded wait is never restarted (the kernel's accept neither).
        if (errno == EINTR && !deadline && restart_after_signal()) continue;
        return -1;
      }
      if (n == 0) return fail(EAGAIN);  // SO_RCVTIMEO passed
    }
    for (int i = 0; i < 2; i++) {
      bool kernel = (i == 0) == kernel_first;
      if (!p[kernel ? 1 : 0].revents) continue;
      int nfd = kernel ? accept_kernel(fd, addr, len, flags) : accept_rdma(e, addr, len, flags);
      if (nfd >= 0 || !would_block(errno)) return nfd;
    }
    if (!blocking) return fail(EAGAIN);
    // Both were ready and another thread or process took the connections:
    // wait again.
  }
}

}  // namespace rspreload
