// Another process on the client's host that rconnects to a fork-mode
// server's port while the server moves a connection onto RDMA (the
// preload's passive side listens there then): the impostor of
// preload_fork_test.cpp. Not a program under the preload: it calls the r*
// calls itself.
//
//   fork_impostor IP PORT WAIT_MS
//
// Tries rconnect every 5 ms for WAIT_MS until one is taken, prints
// "connected from port N", then reads until the connection ends (at most
// 10 s) and prints "ended: B bytes". Exit 0 when the server ended it, 2 when
// it never connected, 3 when the connection was still open after 10 s.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

namespace {

long long now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: fork_impostor IP PORT WAIT_MS\n");
    return 1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(atoi(argv[2])));
  inet_pton(AF_INET, argv[1], &to.sin_addr);
  long long until = now_ms() + atoi(argv[3]);
  int fd = -1;
  while (now_ms() < until) {
    fd = rsocket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && rconnect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) break;
    if (fd >= 0) rclose(fd);
    fd = -1;
    usleep(5000);
  }
  if (fd < 0) {
    printf("never connected\n");
    return 2;
  }
  sockaddr_in me{};
  socklen_t len = sizeof me;
  rgetsockname(fd, reinterpret_cast<sockaddr*>(&me), &len);
  printf("connected from port %d\n", ntohs(me.sin_port));
  fflush(stdout);
  size_t bytes = 0;
  long long end = now_ms() + 10000;
  for (;;) {
    int left = static_cast<int>(end - now_ms());
    if (left <= 0) {
      printf("still open: %zu bytes\n", bytes);
      return 3;
    }
    pollfd p{fd, POLLIN, 0};
    if (rpoll(&p, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = rrecv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    bytes += static_cast<size_t>(n);
  }
  printf("ended: %zu bytes\n", bytes);
  rclose(fd);
  return 0;
}
