// Cases: socket and bind, listen, accept and accept4, connect.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "frame.h"

// --- socket, bind -------------------------------------------------------------------

CASE(bind_short_addrlen, "bind", 0, "bind=-1:EINVAL") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  R("bind", bind(fd, (sockaddr *)&ADDR, ALEN - 1));
}

CASE(bind_bad_family, "bind", 0, "bind=-1:EAFNOSUPPORT") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  sockaddr_storage a = ADDR;
  a.ss_family = AF_UNIX;
  R("bind", bind(fd, (sockaddr *)&a, ALEN));
}

CASE(bind_port_in_use, "bind", 0, "bind=-1:EADDRINUSE") {
  int l = listener();
  int fd = socket(FAM, SOCK_STREAM, 0);
  R("bind", bind(fd, (sockaddr *)&LADDR, LLEN));
  close(l);
}

CASE(bind_twice, "bind", 0, "bind=0 bind2=-1:EINVAL") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  R("bind", bind(fd, (sockaddr *)&ADDR, ALEN));
  R("bind2", bind(fd, (sockaddr *)&ADDR, ALEN));
}

CASE(bind_port_after_close, "bind", 0, "bind=0 port=same") {
  int l = listener();
  sockaddr_storage a = LADDR;
  close(l);
  int fd = socket(FAM, SOCK_STREAM, 0);
  R("bind", bind(fd, (sockaddr *)&a, LLEN));
  socklen_t len = sizeof(sockaddr_storage);
  sockaddr_storage b{};
  getsockname(fd, (sockaddr *)&b, &len);
  obs("port=%s", port_of(b) == port_of(a) ? "same" : "other");
}

CASE(bind_reuseaddr_both, "bind", 0, "bind=-1:EADDRINUSE") {
  // Two sockets with SO_REUSEADDR on one port, the first listening: Linux refuses the second.
  int one = 1;
  int a = socket(FAM, SOCK_STREAM, 0);
  setsockopt(a, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(a, (sockaddr *)&ADDR, ALEN)) setup_failed("bind");
  LLEN = sizeof LADDR;
  getsockname(a, (sockaddr *)&LADDR, &LLEN);
  listen(a, 4);
  int b = socket(FAM, SOCK_STREAM, 0);
  setsockopt(b, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  R("bind", bind(b, (sockaddr *)&LADDR, LLEN));
}

// Two listeners on one port, both with SO_REUSEPORT (nginx's and HAProxy's
// workers, a Go server's): both bind and listen, and the connections made
// to the port are accepted, by one or the other.
CASE(bind_reuseport_two_listeners, "bind", DATA, "bind=0 bind2=0 listen=0 listen2=0 connected=4 accepted=4") {
  int one = 1;
  int a = socket(FAM, SOCK_STREAM, 0), b = socket(FAM, SOCK_STREAM, 0);
  setsockopt(a, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  setsockopt(b, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  R("bind", bind(a, (sockaddr *)&ADDR, ALEN));
  LLEN = sizeof LADDR;
  getsockname(a, (sockaddr *)&LADDR, &LLEN);
  R("bind2", bind(b, (sockaddr *)&LADDR, LLEN));
  R("listen", listen(a, 16));
  R("listen2", listen(b, 16));
  int connected = 0, accepted = 0;
  std::vector<int> clients;
  for (int i = 0; i < 4; i++) {
    int c = dial(LADDR, LLEN);
    connected += c >= 0;
    clients.push_back(c);
  }
  double end = mono() + 5;
  while (accepted < connected && mono() < end) {
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    if (poll(p, 2, 500) <= 0) continue;
    for (const pollfd &q : p)
      if (q.revents & POLLIN) {
        int s = accept(q.fd, nullptr, nullptr);
        accepted += s >= 0;
      }
  }
  obs("connected=%d accepted=%d", connected, accepted);
}

CASE(socket_bad_type, "bind", 0, "socket=-1:EINVAL") { R("socket", socket(FAM, 99, 0)); }

CASE(getsockname_after_bind, "bind", 0, "bind=0 getsockname=0 len=16 port=set") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  R("bind", bind(fd, (sockaddr *)&ADDR, ALEN));
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  R("getsockname", getsockname(fd, (sockaddr *)&a, &len));
  obs("len=%u port=%s", len, port_of(a) ? "set" : "0");
}

// --- listen -------------------------------------------------------------------------

// N clients connect at once to a listener with BACKLOG; the server accepts one
// every 50 ms, for at most 8 s. Linux drops what overflows the accept queue
// and the clients retry: every client connects. "unfinished": clients still
// connecting (or waiting for their reply) at the end.
static void backlog_case(int backlog, int clients) {
  int l = listener(backlog);
  std::atomic<int> ok{0}, refused{0}, other{0}, finished{0};
  for (int i = 0; i < clients; i++)
    std::thread([&] {
      int fd = dial(LADDR, LLEN);
      if (fd >= 0) {
        ok++;
        // A request, then the reply: as a client of a real protocol (with
        // SYN cookies a connection the server has not seen yet is made by
        // the client's first data).
        char b;
        send(fd, "q", 1, MSG_NOSIGNAL);
        recv(fd, &b, 1, 0);
      } else if (errno == ECONNREFUSED) {
        refused++;
      } else {
        other++;
      }
      finished++;
    }).detach();
  int accepted = 0;
  double end = mono() + 8;
  while (accepted < clients && finished < clients && mono() < end) {
    usleep(50 * 1000);  // the slow server: what the case is about
    pollfd p = {l, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    int s = accept(l, nullptr, nullptr);
    if (s < 0) break;
    accepted++;
    char b;
    if (recv(s, &b, 1, 0) == 1) send(s, "x", 1, MSG_NOSIGNAL);
  }
  while (finished < clients && mono() < end) usleep(10 * 1000);
  obs("connected=%d refused=%d other=%d accepted=%d unfinished=%d", ok.load(), refused.load(), other.load(),
      accepted, clients - finished.load());
}

CASE(listen_backlog1_8clients, "listen", DATA | LONG, "connected=8 refused=0 other=0 accepted=8 unfinished=0") {
  backlog_case(1, 8);
}
CASE(listen_backlog4_16clients, "listen", DATA | LONG, "connected=16 refused=0 other=0 accepted=16 unfinished=0") {
  backlog_case(4, 16);
}

// How many connections a listener holds for accept, nobody accepting: the
// kernel's accept queue takes backlog + 1 (0 takes one); the request past it
// is dropped and its connect goes on trying (here: still under way after
// 1.5 s, then made once the server accepts).
static void held_case(int backlog, int clients) {
  int l = listener(backlog);
  std::vector<pollfd> p;
  for (int i = 0; i < clients; i++) {
    int c = socket(FAM, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(c, (sockaddr *)&LADDR, LLEN);
    p.push_back({c, POLLOUT, 0});
    usleep(100 * 1000);  // in order: the last ones are those past the queue
  }
  usleep(1500 * 1000);
  poll(p.data(), p.size(), 0);
  int connected = 0;
  for (const pollfd &q : p) connected += q.revents == POLLOUT;
  obs("connected=%d waiting=%d", connected, clients - connected);
  pollfd room = {l, POLLIN, 0};
  if (poll(&room, 1, 2000) == 1) close(accept(l, nullptr, nullptr));  // room for one more
  pollfd last = p.back();
  R("poll_last", poll(&last, 1, 9000));
  obs("revents=%s", pollbits(last.revents));
}

CASE(listen_backlog2_holds_3, "listen", LONG, "connected=3 waiting=1 poll_last=1 revents=OUT") {
  held_case(2, 4);
}
CASE(listen_backlog0_holds_1, "listen", LONG, "connected=1 waiting=1 poll_last=1 revents=OUT") {
  held_case(0, 2);
}

CASE(listen_twice, "listen", 0, "listen2=0") {
  int l = listener(2);
  R("listen2", listen(l, 8));
}

CASE(listen_on_connected, "listen", 0, "listen=-1:EINVAL") {
  int c, s;
  pair(c, s);
  R("listen", listen(c, 4));
}

CASE(listen_unbound, "listen", 0, "listen=0 port=set") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  R("listen", listen(fd, 4));
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(fd, (sockaddr *)&a, &len);
  obs("port=%s", port_of(a) ? "set" : "0");
}

// --- accept -------------------------------------------------------------------------

static int accept_one(int flags) {
  int l = listener();
  std::thread t([&] { (void)dial(LADDR, LLEN); pause(); });
  t.detach();
  int s = flags < 0 ? accept(l, nullptr, nullptr) : accept4(l, nullptr, nullptr, flags);
  if (s < 0) setup_failed("accept");
  return s;
}

CASE(accept4_nonblock, "accept", 0, "nonblock=1 recv=-1:EAGAIN") {
  int s = accept_one(SOCK_NONBLOCK);
  obs("nonblock=%d", !!(fcntl(s, F_GETFL) & O_NONBLOCK));
  char b;
  R("recv", recv(s, &b, 1, 0));
}

CASE(accept4_cloexec, "accept", 0, "cloexec=1") {
  int s = accept_one(SOCK_CLOEXEC);
  obs("cloexec=%d", fcntl(s, F_GETFD) & FD_CLOEXEC);
}

CASE(accept_flags_not_inherited, "accept", 0, "nonblock=0 cloexec=0") {
  // Linux: an accepted socket does not inherit the listener's O_NONBLOCK.
  int l = listener();
  fcntl(l, F_SETFL, O_NONBLOCK);
  std::thread t([&] { (void)dial(LADDR, LLEN); pause(); });
  t.detach();
  pollfd p = {l, POLLIN, 0};
  poll(&p, 1, 3000);
  int s = accept(l, nullptr, nullptr);
  if (s < 0) setup_failed("accept");
  obs("nonblock=%d cloexec=%d", !!(fcntl(s, F_GETFL) & O_NONBLOCK), fcntl(s, F_GETFD) & FD_CLOEXEC);
}

CASE(accept_not_listening, "accept", 0, "accept=-1:EINVAL") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  bind(fd, (sockaddr *)&ADDR, ALEN);
  R("accept", accept(fd, nullptr, nullptr));
}

CASE(accept_nonblock_eagain, "accept", 0, "accept=-1:EAGAIN@now") {
  int l = listener();
  fcntl(l, F_SETFL, O_NONBLOCK);
  T("accept", accept(l, nullptr, nullptr));
}

CASE(accept_blocks_until_connect, "accept", 0, "accept=0@after-peer fd=ok") {
  int l = listener();
  later(PEER_MS, [] { (void)dial(LADDR, LLEN); pause(); });
  long s = T("accept", accept(l, nullptr, nullptr) >= 0 ? 0 : -1);
  obs("fd=%s", s == 0 ? "ok" : "none");
}

CASE(accept_peer_address, "accept", 0, "accept=0 len=16 family=same addr=same port=same") {
  int l = listener();
  std::atomic<int> cport{0};
  std::thread t([&] {
    int c = dial(LADDR, LLEN);
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    getsockname(c, (sockaddr *)&a, &len);
    cport = port_of(a);
    pause();
  });
  t.detach();
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  long s = R("accept", accept(l, (sockaddr *)&a, &len) >= 0 ? 0 : -1);
  while (s == 0 && !cport) usleep(1000);
  bool addr_same = a.ss_family == FAM &&
                   (FAM == AF_INET ? ((sockaddr_in &)a).sin_addr.s_addr == ((sockaddr_in &)ADDR).sin_addr.s_addr
                                   : !memcmp(&((sockaddr_in6 &)a).sin6_addr, &((sockaddr_in6 &)ADDR).sin6_addr, 16));
  obs("len=%u family=%s addr=%s port=%s", len, a.ss_family == FAM ? "same" : "other", addr_same ? "same" : "other",
      port_of(a) == cport ? "same" : "other");
}

// SO_RCVTIMEO bounds a blocking accept, as a receive: EAGAIN at the bound.
CASE(accept_rcvtimeo, "accept", 0, "set=0 accept=-1:EAGAIN@now waited=bound") {
  int l = listener();
  timeval tv = {0, 300000};
  R("set", setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
  double t0 = mono();
  T("accept", accept(l, nullptr, nullptr));
  obs("waited=%s", mono() - t0 >= 0.25 ? "bound" : "less");
}

CASE(accept_wakes_on_shutdown, "accept", 0, "accept=-1:EINVAL@after-peer") {
  int l = listener();
  later(PEER_MS, [l] { shutdown(l, SHUT_RDWR); });
  T("accept", accept(l, nullptr, nullptr));
}

// A connection the listener had made but nobody accepted ends with the
// listener: the client, already connected, learns it at its next call
// (rdma-core 44 leaves it waiting for ever).
CASE(accept_queue_dropped_at_close, "accept", 0, "poll=1 close=0 recv=-1:ECONNRESET@now") {
  int l = listener();
  int c = dial(LADDR, LLEN);
  if (c < 0) setup_failed("dial");
  pollfd p = {l, POLLIN, 0};
  R("poll", poll(&p, 1, 5000));
  R("close", close(l));
  char b;
  T("recv", recv(c, &b, 1, 0));
}

// --- connect ------------------------------------------------------------------------

// "so_error=NAME" (or 0): the pending error a connect left, as getsockopt reads it.
static void obs_so_error(int fd) {
  int err = -1;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  obs("so_error=%s", err ? strerrorname_np(err) : "0");
}

CASE(connect_blocking, "connect", 0, "connect=0@now accept=0") {
  int l = listener();
  int c = socket(FAM, SOCK_STREAM, 0);
  T("connect", connect(c, (sockaddr *)&LADDR, LLEN));
  R("accept", accept(l, nullptr, nullptr) >= 0 ? 0 : -1);
}

CASE(connect_nonblocking, "connect", 0, "connect=-1:EINPROGRESS poll=1@now revents=OUT so_error=0 accept=0") {
  int l = listener();
  int c = socket(FAM, SOCK_STREAM | SOCK_NONBLOCK, 0);
  long r = R("connect", connect(c, (sockaddr *)&LADDR, LLEN));
  if (r < 0 && errno == EINPROGRESS) {
    pollfd p = {c, POLLOUT, 0};
    T("poll", poll(&p, 1, 3000));
    obs("revents=%s", pollbits(p.revents));
  }
  obs_so_error(c);
  R("accept", accept(l, nullptr, nullptr) >= 0 ? 0 : -1);
}

CASE(connect_twice, "connect", 0, "connect2=-1:EISCONN") {
  int c, s;
  pair(c, s);
  R("connect2", connect(c, (sockaddr *)&LADDR, LLEN));
}

CASE(connect_refused, "connect", 0, "connect=-1:ECONNREFUSED@now") {
  int l = listener();
  sockaddr_storage a = LADDR;
  close(l);
  int c = socket(FAM, SOCK_STREAM, 0);
  T("connect", connect(c, (sockaddr *)&a, LLEN));
}

CASE(connect_nonblocking_refused, "connect", 0, "connect=-1:EINPROGRESS poll=1@now revents=OUT|ERR|HUP so_error=ECONNREFUSED") {
  int l = listener();
  sockaddr_storage a = LADDR;
  close(l);
  int c = socket(FAM, SOCK_STREAM | SOCK_NONBLOCK, 0);
  long r = R("connect", connect(c, (sockaddr *)&a, LLEN));
  if (r < 0 && errno == EINPROGRESS) {
    pollfd p = {c, POLLOUT, 0};
    T("poll", poll(&p, 1, 3000));
    obs("revents=%s", pollbits(p.revents));
  }
  obs_so_error(c);
}

CASE(connect_nonblocking_again, "connect", 0, "connect2=0") {
  // A second connect while the first is under way, or after it completed.
  int l = listener();
  int c = socket(FAM, SOCK_STREAM | SOCK_NONBLOCK, 0);
  connect(c, (sockaddr *)&LADDR, LLEN);
  pollfd p = {c, POLLOUT, 0};
  poll(&p, 1, 3000);
  R("connect2", connect(c, (sockaddr *)&LADDR, LLEN));
  (void)l;
}

// SO_SNDTIMEO bounds a blocking connect: a listener whose backlog is full
// leaves the second client's request unanswered; its connect says
// EINPROGRESS at the bound and goes on connecting (another connect meanwhile:
// EALREADY), and once the server accepts the first client the second's
// connection is made, which poll reports.
CASE(connect_sndtimeo_backlog_full, "connect", LONG,
     "set=0 connect=-1:EINPROGRESS@now waited=bound connect2=-1:EALREADY accept=0 poll=1 revents=OUT "
     "so_error=0 connect3=0") {
  int l = listener(0);
  int first = dial(LADDR, LLEN);
  if (first < 0) setup_failed("dial");
  int c = socket(FAM, SOCK_STREAM, 0);
  timeval tv = {0, 300000};
  R("set", setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv));
  double t0 = mono();
  T("connect", connect(c, (sockaddr *)&LADDR, LLEN));
  obs("waited=%s", mono() - t0 >= 0.25 ? "bound" : "less");
  R("connect2", connect(c, (sockaddr *)&LADDR, LLEN));
  R("accept", accept(l, nullptr, nullptr) >= 0 ? 0 : -1);
  pollfd p = {c, POLLOUT, 0};
  R("poll", poll(&p, 1, 9000));
  obs("revents=%s", pollbits(p.revents));
  obs_so_error(c);
  R("connect3", connect(c, (sockaddr *)&LADDR, LLEN));
}

// A blocking receive on a socket whose connect goes on behind (past its
// SO_SNDTIMEO) waits for the connection, as long as SO_RCVTIMEO lets it,
// then for data: here the server accepts the first client, then this one,
// and sends it a byte.
CASE(recv_while_connect_goes_on, "connect", DATA | LONG,
     "connect=-1:EINPROGRESS@now recv=-1:EAGAIN@now waited=bound recv2=1@after-peer") {
  int l = listener(0);
  int first = dial(LADDR, LLEN);
  if (first < 0) setup_failed("dial");
  int c = socket(FAM, SOCK_STREAM, 0);
  timeval tv = {0, 200000};
  setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  T("connect", connect(c, (sockaddr *)&LADDR, LLEN));
  tv = {0, 300000};
  setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char b;
  double t0 = mono();
  T("recv", recv(c, &b, 1, 0));
  obs("waited=%s", mono() - t0 >= 0.25 ? "bound" : "less");
  tv = {0, 0};
  setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  later(PEER_MS, [l] {
    close(accept(l, nullptr, nullptr));
    int s = accept(l, nullptr, nullptr);
    send(s, "x", 1, MSG_NOSIGNAL);
  });
  T("recv2", recv(c, &b, 1, 0));
}

// A signal (no SA_RESTART) in a blocking connect: EINTR, and the handshake
// goes on; a second blocking connect waits for its end (here: until the
// server accepts the first client, whose backlog slot the second's request
// waited for), a third says EISCONN.
CASE(connect_interrupted_goes_on, "connect", LONG,
     "connect=-1:EINTR@now connect2=0@after-peer connect3=-1:EISCONN") {
  int l = listener(0);
  int first = dial(LADDR, LLEN);
  if (first < 0) setup_failed("dial");
  struct sigaction sa = {};
  sa.sa_handler = [](int) {};
  sigaction(SIGALRM, &sa, nullptr);
  itimerval it = {{0, 0}, {0, 300000}};
  setitimer(ITIMER_REAL, &it, nullptr);
  int c = socket(FAM, SOCK_STREAM, 0);
  T("connect", connect(c, (sockaddr *)&LADDR, LLEN));
  later(PEER_MS, [l] { close(accept(l, nullptr, nullptr)); });
  T("connect2", connect(c, (sockaddr *)&LADDR, LLEN));
  R("connect3", connect(c, (sockaddr *)&LADDR, LLEN));
}

// A connect to an address on the link that nobody holds: the neighbour is
// never found, and the kernel says EHOSTUNREACH after its three probes a
// second apart (rdma-core's non-blocking connect retries address
// resolution for 127 s; ours gives up as the kernel does).
CASE(connect_onlink_nobody, "connect", LONG, "connect=-1:EHOSTUNREACH@slow took=under-5s") {
  if (FAM != AF_INET) setup_failed("family");
  sockaddr_in a;
  memcpy(&a, &ADDR, sizeof a);
  a.sin_addr.s_addr = htonl((ntohl(a.sin_addr.s_addr) & ~0xffu) | 200u);  // .200 of the /24
  a.sin_port = htons(9);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  double t0 = mono();
  T("connect", connect(c, (sockaddr *)&a, sizeof a));
  obs("took=%s", mono() - t0 < 5 ? "under-5s" : "longer");
}

CASE(connect_nonblocking_onlink_nobody, "connect", LONG,
     "connect=-1:EINPROGRESS poll=1@slow revents=OUT|ERR|HUP so_error=EHOSTUNREACH") {
  if (FAM != AF_INET) setup_failed("family");
  sockaddr_in a;
  memcpy(&a, &ADDR, sizeof a);
  a.sin_addr.s_addr = htonl((ntohl(a.sin_addr.s_addr) & ~0xffu) | 201u);
  a.sin_port = htons(9);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  R("connect", connect(c, (sockaddr *)&a, sizeof a));
  pollfd p = {c, POLLOUT, 0};
  T("poll", poll(&p, 1, 9000));
  obs("revents=%s", pollbits(p.revents));
  obs_so_error(c);
}

CASE(connect_short_addrlen, "connect", 0, "connect=-1:EINVAL") {
  int l = listener();
  int c = socket(FAM, SOCK_STREAM, 0);
  R("connect", connect(c, (sockaddr *)&LADDR, LLEN - 1));
  (void)l;
}

CASE(connect_v6_exchange, "connect", V6 | DATA, "send=4096 recv=4096 data=ok") {
  int c, s;
  pair(c, s);
  char buf[4096];
  fill(buf, sizeof buf, 6);
  R("send", writen(c, buf, sizeof buf));
  char got[4096];
  R("recv", readn(s, got, sizeof got));
  obs("data=%s", same(got, sizeof got, 6) ? "ok" : "bad");
}
