// What the two cycle benchmarks share (conn_cycle: a socket program's
// connect, echo and close; cm_cycle: the connection manager's own connect
// and disconnect): the clock, the medians they print, and their server,
// forked and waited for until it listens.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace bench {

inline double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline double p90(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() * 9 / 10];
}

// A child running serve(ready), which writes a byte to ready once it
// listens; returns once it did (the child's pid), or -1 (said on stderr).
inline pid_t fork_server(const std::function<int(int ready)>& serve) {
  int ready[2];
  if (pipe(ready)) return -1;
  pid_t server = fork();
  if (server == 0) {
    close(ready[0]);
    _exit(serve(ready[1]));
  }
  close(ready[1]);
  char x;
  bool up = server > 0 && read(ready[0], &x, 1) == 1;
  close(ready[0]);
  if (!up) fprintf(stderr, "the server did not listen\n");
  return up ? server : -1;
}

// The server's end (stopped first if the client failed): whether it exited 0.
inline bool server_done(pid_t server, bool failed) {
  if (failed) kill(server, SIGTERM);
  int status = 0;
  waitpid(server, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace bench
