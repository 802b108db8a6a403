// Cases: fork, exec, a peer that dies, loopback.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "frame.h"

// The exec'd side: "--exec-child send FD" sends "exec" on FD; "--exec-child
// probe FD" exits 0 if FD is closed (EBADF), 1 if it is open.
void exec_child(int argc, char **argv) {
  if (argc < 4) _exit(2);
  int fd = atoi(argv[3]);
  if (!strcmp(argv[2], "send")) _exit(send(fd, "exec", 4, MSG_NOSIGNAL) == 4 ? 0 : 3);
  if (!strcmp(argv[2], "probe")) _exit(fcntl(fd, F_GETFD) < 0 && errno == EBADF ? 0 : 1);
  _exit(2);
}

static int status_of(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// --- fork ---------------------------------------------------------------------------------

CASE(fork_child_uses_accepted, "fork", DATA, "child=0 client_read=child eof=0") {
  int l = listener();
  std::string got;
  long eof = -2;
  std::thread cl([&] {
    int c = dial(LADDR, LLEN);
    char b[8] = {0};
    if (readn(c, b, 5) == 5) got = b;
    eof = recv(c, b, 1, 0);
  });
  int s = accept(l, nullptr, nullptr);
  if (s < 0) setup_failed("accept");
  pid_t pid = fork();
  if (pid == 0) _exit(send(s, "child", 5, MSG_NOSIGNAL) == 5 ? 0 : 1);
  close(s);
  obs("child=%d", status_of(pid));
  cl.join();
  obs("client_read=%s eof=%ld", got.empty() ? "none" : got.c_str(), eof);
}

CASE(fork_listener_child_accepts, "fork", DATA, "connect=0@now read=3 data=kid child=0") {
  int l = listener();
  pid_t pid = fork();
  if (pid == 0) {
    int s = accept(l, nullptr, nullptr);
    if (s < 0) _exit(1);
    send(s, "kid", 3, MSG_NOSIGNAL);
    char b;
    recv(s, &b, 1, 0);
    _exit(0);
  }
  close(l);  // the child's copy keeps the listener
  int c = socket(FAM, SOCK_STREAM, 0);
  T("connect", connect(c, (sockaddr *)&LADDR, LLEN));
  char b[4] = {0};
  R("read", readn(c, b, 3));
  obs("data=%s", b);
  close(c);
  obs("child=%d", status_of(pid));
}

CASE(fork_parent_keeps_connection, "fork", DATA, "child=0 send=5 recv=5 data=still") {
  // A child forked (and exited) after the connection was made does not disturb it.
  int c, s;
  pair(c, s);
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  obs("child=%d", status_of(pid));
  R("send", send(c, "still", 5, 0));
  char b[8] = {0};
  R("recv", recv(s, b, 5, MSG_WAITALL));
  obs("data=%s", b);
}

// --- exec ----------------------------------------------------------------------------------

CASE(exec_keeps_fd, "exec", DATA, "child=0 recv=4 data=exec recv=0@now") {
  int c, s;
  pair(c, s);
  pid_t pid = fork();
  if (pid == 0) {
    std::string fd = std::to_string(c);
    execl(SELF, SELF, "--exec-child", "send", fd.c_str(), (char *)0);
    _exit(127);
  }
  close(c);
  obs("child=%d", status_of(pid));
  char b[8] = {0};
  R("recv", readn(s, b, 4));
  obs("data=%s", b[0] ? b : "none");
  T("recv", recv(s, b, 1, 0));
}

CASE(exec_cloexec_closed, "exec", 0, "child_sees=closed") {
  int c = socket(FAM, SOCK_STREAM | SOCK_CLOEXEC, 0);
  pid_t pid = fork();
  if (pid == 0) {
    std::string fd = std::to_string(c);
    execl(SELF, SELF, "--exec-child", "probe", fd.c_str(), (char *)0);
    _exit(127);
  }
  obs("child_sees=%s", status_of(pid) == 0 ? "closed" : "open");
}

// --- a peer that dies ----------------------------------------------------------------------

// A peer process (forked before any socket exists) connects to our listener
// and waits; it is killed PEER_MS after we began to read.
static void killed_peer(int &s, pid_t &pid) {
  int p[2];
  if (pipe(p)) setup_failed("pipe");
  pid = fork();
  if (pid == 0) {
    sockaddr_storage a;
    socklen_t len;
    if (read(p[0], &a, sizeof a) != sizeof a || read(p[0], &len, sizeof len) != sizeof len) _exit(1);
    int c = dial(a, len);
    if (c < 0) _exit(1);
    send(c, "hi", 2, 0);
    pause();
    _exit(0);
  }
  int l = listener();
  if (write(p[1], &LADDR, sizeof LADDR) != sizeof LADDR || write(p[1], &LLEN, sizeof LLEN) != sizeof LLEN)
    setup_failed("write");
  s = accept(l, nullptr, nullptr);
  if (s < 0) setup_failed("accept");
  char b[2];
  if (readn(s, b, 2) != 2) setup_failed("read");
  pid_t k = pid;
  later(PEER_MS, [k] { kill(k, SIGKILL); });
}

CASE(peer_killed_reader_wakes, "peer-death", 0, "recv=0@after-peer") {
  int s;
  pid_t pid;
  killed_peer(s, pid);
  char b;
  T("recv", recv(s, &b, 1, 0));
}

CASE(peer_killed_send_fails, "peer-death", 0, "send=EPIPE") {
  int s;
  pid_t pid;
  killed_peer(s, pid);
  char b;
  recv(s, &b, 1, 0);
  long r = 0;
  for (int i = 0; i < 20 && r >= 0; i++) {
    r = send(s, "x", 1, MSG_NOSIGNAL);
    if (r >= 0) {
      pollfd p = {s, POLLERR, 0};
      poll(&p, 1, 200);
    }
  }
  obs("send=%s", r < 0 ? strerrorname_np(errno) : "ok");
}

CASE(peer_killed_poll_wakes, "peer-death", 0, "poll=1@after-peer revents=IN") {
  int s;
  pid_t pid;
  killed_peer(s, pid);
  pollfd p = {s, POLLIN, 0};
  T("poll", poll(&p, 1, 3000));
  obs("revents=%s", pollbits(p.revents & (POLLIN | POLLHUP | POLLERR)));
}

// --- loopback -------------------------------------------------------------------------------

// A server on the wildcard address, a client to TO (the same port): the bytes go both ways.
static void wildcard_server(int family, const char *to) {
  sockaddr_storage any{}, dst{};
  socklen_t len = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  any.ss_family = family;
  if (family == AF_INET6) {
    ((sockaddr_in6 &)any).sin6_addr = in6addr_any;
  } else {
    ((sockaddr_in &)any).sin_addr.s_addr = htonl(INADDR_ANY);
  }
  int l = socket(family, SOCK_STREAM, 0);
  if (bind(l, (sockaddr *)&any, len) || listen(l, 8)) setup_failed("listen");
  socklen_t ll = sizeof any;
  getsockname(l, (sockaddr *)&any, &ll);
  if (to) {
    dst.ss_family = family;
    inet_pton(family, to, family == AF_INET6 ? (void *)&((sockaddr_in6 &)dst).sin6_addr
                                             : (void *)&((sockaddr_in &)dst).sin_addr);
  } else {
    dst = ADDR;
  }
  dst = with_port(dst, port_of(any));
  int s = -1;
  std::thread t([&] { s = accept(l, nullptr, nullptr); });
  int c = socket(family, SOCK_STREAM, 0);
  long r = T("connect", connect(c, (sockaddr *)&dst, len));
  if (r < 0) shutdown(l, SHUT_RDWR);  // wakes the accept (Linux)
  t.join();
  if (r < 0 || s < 0) return;
  R("send", send(c, "ping", 4, 0));
  char b[9] = {0};
  R("recv", readn(s, b, 4));
  R("reply", send(s, "pong", 4, 0));
  R("recv", readn(c, b + 4, 4));
  obs("data=%s", b);
}

CASE(loopback_any_to_127, "loopback", LOOP, "connect=0@now send=4 recv=4 reply=4 recv=4 data=pingpong") { wildcard_server(AF_INET, "127.0.0.1"); }
CASE(loopback_any_to_own_address, "loopback", DATA, "connect=0@now send=4 recv=4 reply=4 recv=4 data=pingpong") { wildcard_server(AF_INET, nullptr); }
CASE(loopback6_any_to_v6_loopback, "loopback", LOOP | V6, "connect=0@now send=4 recv=4 reply=4 recv=4 data=pingpong") { wildcard_server(AF_INET6, "::1"); }

CASE(loopback_127_both, "loopback", LOOP, "bind=0 listen=0 connect=0@now send=2 recv=2 data=lo") {
  sockaddr_storage a{};
  auto &a4 = (sockaddr_in &)a;
  a4.sin_family = AF_INET;
  a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  R("bind", bind(l, (sockaddr *)&a, sizeof a4));
  R("listen", listen(l, 4));
  socklen_t len = sizeof a;
  getsockname(l, (sockaddr *)&a, &len);
  int s = -1;
  std::thread t([&] { s = accept(l, nullptr, nullptr); });
  int c = socket(AF_INET, SOCK_STREAM, 0);
  long r = T("connect", connect(c, (sockaddr *)&a, sizeof a4));
  if (r < 0) shutdown(l, SHUT_RDWR);
  t.join();
  if (r < 0 || s < 0) return;
  R("send", send(c, "lo", 2, 0));
  char b[4] = {0};
  R("recv", readn(s, b, 2));
  obs("data=%s", b);
}
