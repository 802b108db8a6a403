#include "fork.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <semaphore.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "interpose.h"

namespace rspreload {
namespace {

pthread_mutex_t settling = PTHREAD_MUTEX_INITIALIZER;

// Non-blocking flag, SO_REUSEADDR and TCP_NODELAY carry over from the TCP
// socket to the rsocket (what rdma-core's preload copies).
void copy_options(int fd, int rfd) {
  int flags = real::fcntl(fd, F_GETFL);
  if (flags > 0) rfcntl(rfd, F_SETFL, flags);
  for (auto [level, name] : {std::pair{SOL_SOCKET, SO_REUSEADDR}, {IPPROTO_TCP, TCP_NODELAY}}) {
    int v = 0;
    socklen_t len = sizeof v;
    if (real::getsockopt(fd, level, name, &v, &len) == 0 && v)
      rsetsockopt(rfd, level, name, &v, len);
  }
}

// The connecting side: wait (blocking) for the peer's zero, then connect an
// rsocket to the address the TCP connection reached.
int move_active(int fd) {
  uint32_t msg = 1;
  int flags = real::fcntl(fd, F_GETFL);
  real::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  ssize_t got = real::recv(fd, &msg, sizeof msg, MSG_PEEK);
  real::fcntl(fd, F_SETFL, flags);
  if (got != sizeof msg || msg != 0) return -1;
  sockaddr_storage peer;
  socklen_t len = sizeof peer;
  if (real::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len)) return -1;
  int rfd = rsocket(peer.ss_family, SOCK_STREAM, 0);
  if (rfd < 0) return -1;
  if (rconnect(rfd, reinterpret_cast<sockaddr*>(&peer), len)) {
    rclose(rfd);
    return -1;
  }
  return rfd;
}

// The accepting side: listen on an rsocket at the TCP connection's port (one
// process at a time, as rdma-core does with the same named semaphore), tell
// the peer with a zero, accept.
int move_passive(int fd) {
  sockaddr_storage local;
  socklen_t len = sizeof local;
  if (real::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len)) return -1;
  if (local.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr = INADDR_ANY;
  else
    reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr = in6addr_any;
  sem_t* sem = sem_open("/rsocket_fork", O_CREAT | O_RDWR, S_IRWXU | S_IRWXG, 1);
  if (sem != SEM_FAILED) sem_wait(sem);
  int rfd = -1;
  int lfd = rsocket(local.ss_family, SOCK_STREAM, 0);
  if (lfd >= 0) {
    int one = 1;
    rsetsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    uint32_t zero = 0;
    if (rbind(lfd, reinterpret_cast<sockaddr*>(&local), len) == 0 && rlisten(lfd, 1) == 0 &&
        real::write(fd, &zero, sizeof zero) == sizeof zero)
      rfd = raccept(lfd, nullptr, nullptr);
    rclose(lfd);
  }
  if (sem != SEM_FAILED) {
    sem_post(sem);
    sem_close(sem);
  }
  return rfd;
}

}  // namespace

Kind settle_fork(int fd, Entry* e) {
  pthread_mutex_lock(&settling);
  Kind k = e->kind.load(std::memory_order_acquire);
  if (k == Kind::fork_pending && (e->fork == ForkRole::active || e->fork == ForkRole::passive)) {
    int saved = errno;
    int rfd = e->fork == ForkRole::active ? move_active(fd) : move_passive(fd);
    if (rfd >= 0) {
      apply_settings(rfd);
      copy_options(fd, rfd);
      real::shutdown(fd, SHUT_RDWR);
      e->rfd = rfd;
      k = Kind::rsocket;
    } else {
      k = Kind::kernel;  // the connection stays on TCP
    }
    e->kind.store(k, std::memory_order_release);
    errno = saved;
  }
  pthread_mutex_unlock(&settling);
  return k;
}

}  // namespace rspreload
