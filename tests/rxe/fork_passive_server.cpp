// A fresh process whose one accepted connection makes a passive fork-mode
// move (preload_fork_test.cpp): run under librspreload.so with
// RDMAV_FORK_SAFE=1, it has opened no RDMA device before its first call on
// that connection. Ordinary socket calls only (the preload takes them).
//
//   fork_passive_server IP PORT
//
// Listens on IP:PORT, accepts one connection, writes "x" (the call that
// moves it), reads until end of file, prints "read: B bytes" and exits 0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: fork_passive_server IP PORT\n");
    return 1;
  }
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(atoi(argv[2])));
  inet_pton(AF_INET, argv[1], &at.sin_addr);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&at), sizeof at) || listen(l, 1)) {
    perror("listen");
    return 2;
  }
  int s = accept(l, nullptr, nullptr);
  if (s < 0 || write(s, "x", 1) != 1) {
    perror("accept or write");
    return 3;
  }
  size_t bytes = 0;
  char buf[4096];
  ssize_t n;
  while ((n = read(s, buf, sizeof buf)) > 0) bytes += static_cast<size_t>(n);
  printf("read: %zu bytes\n", bytes);
  return 0;
}
