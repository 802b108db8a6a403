// Connection setup as a socket program sees it (issue 39's "setup" row): N
// cycles, one after another, of socket + connect, BYTES echoed, close,
// against a server (forked, under the same preload) that accepts, echoes,
// reads to end-of-file and closes. Plain socket calls: run it bare (kernel
// TCP) or under a preload (bench/conn_cycle.sh does both, rounds
// alternating).
//
//   conn_cycle --addr IP [--port P] [--cycles N] [--bytes 1024]
//
// Prints one line: cycles=N cycle_us=MEDIAN p90_us=P90 connect_us=MEDIAN
// echo_us=MEDIAN close_us=MEDIAN (each step's own median). Exit status 1 if
// a cycle failed (what failed on stderr).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cycle_common.h"
#include "socket_io.h"

namespace {

using namespace bench;

// Accepts `cycles` connections one at a time: echoes `bytes`, reads to
// end-of-file, closes. Says it listens with a byte on `ready`.
int serve(const sockaddr_in& sin, int cycles, size_t bytes, int ready) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (l < 0 || bind(l, reinterpret_cast<const sockaddr*>(&sin), sizeof sin) || listen(l, 128)) {
    perror("server: socket, bind or listen");
    return 1;
  }
  if (write(ready, "x", 1) != 1) return 1;
  std::vector<char> buf(bytes);
  for (int i = 0; i < cycles; i++) {
    int c = accept(l, nullptr, nullptr);
    if (c < 0) {
      perror("server: accept");
      return 1;
    }
    char rest[64];
    bool ok = read_all(c, buf.data(), bytes) && write_all(c, buf.data(), bytes);
    while (ok && read(c, rest, sizeof rest) > 0) {
    }
    close(c);
  }
  close(l);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* addr = nullptr;
  int port = 7460, cycles = 200;
  size_t bytes = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--addr") addr = argv[i + 1];
    else if (a == "--port") port = atoi(argv[i + 1]);
    else if (a == "--cycles") cycles = atoi(argv[i + 1]);
    else if (a == "--bytes") bytes = strtoul(argv[i + 1], nullptr, 10);
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  if (!addr || inet_pton(AF_INET, addr, &sin.sin_addr) != 1 || cycles < 1 || !bytes) {
    fprintf(stderr, "usage: conn_cycle --addr IPv4 [--port P] [--cycles N] [--bytes N]\n");
    return 2;
  }
  pid_t server = fork_server([&](int ready) { return serve(sin, cycles, bytes, ready); });
  if (server < 0) return 1;
  std::vector<char> out(bytes, 'c'), in(bytes);
  std::vector<double> cycle, connect_us, echo, close_us;
  int failed = 0;
  for (int i = 0; i < cycles && !failed; i++) {
    double t0 = now_us();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin)) {
      fprintf(stderr, "cycle %d: socket or connect: %s\n", i, strerror(errno));
      failed = 1;
      break;
    }
    double t1 = now_us();
    if (!write_all(fd, out.data(), bytes) || !read_all(fd, in.data(), bytes) || in != out) {
      fprintf(stderr, "cycle %d: the echo failed\n", i);
      failed = 1;
    }
    double t2 = now_us();
    close(fd);
    double t3 = now_us();
    cycle.push_back(t3 - t0);
    connect_us.push_back(t1 - t0);
    echo.push_back(t2 - t1);
    close_us.push_back(t3 - t2);
  }
  bool server_ok = server_done(server, failed);
  printf("cycles=%zu cycle_us=%.0f p90_us=%.0f connect_us=%.0f echo_us=%.0f close_us=%.0f\n", cycle.size(),
         median(cycle), p90(cycle), median(connect_us), median(echo), median(close_us));
  return failed || !server_ok ? 1 : 0;
}
