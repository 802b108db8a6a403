// Cases: poll, select, epoll (level- and edge-triggered).
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include <vector>

#include "frame.h"

CASE(poll_in_after_data, "poll", DATA, "poll=1@after-peer revents=IN") {
  int c, s;
  pair(c, s);
  later(PEER_MS, [c] { send(c, "d", 1, 0); });
  pollfd p = {s, POLLIN, 0};
  T("poll", poll(&p, 1, 3000));
  obs("revents=%s", pollbits(p.revents));
}

CASE(poll_out_connected, "poll", 0, "poll=1@now revents=OUT") {
  int c, s;
  pair(c, s);
  pollfd p = {c, POLLIN | POLLOUT, 0};
  T("poll", poll(&p, 1, 1000));
  obs("revents=%s", pollbits(p.revents));
}

CASE(poll_idle_times_out, "poll", 0, "poll=0@now revents=0") {
  int c, s;
  pair(c, s);
  pollfd p = {s, POLLIN, 0};
  T("poll", poll(&p, 1, 100));
  obs("revents=%s", pollbits(p.revents));
}

CASE(poll_fresh_socket, "poll", 0, "poll=1@now revents=OUT|HUP") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  pollfd p = {fd, POLLIN | POLLOUT, 0};
  T("poll", poll(&p, 1, 100));
  obs("revents=%s", pollbits(p.revents));
}

CASE(poll_listener_on_connect, "poll", 0, "poll=1@after-peer revents=IN") {
  int l = listener();
  later(PEER_MS, [] { (void)dial(LADDR, LLEN); pause(); });
  pollfd p = {l, POLLIN, 0};
  T("poll", poll(&p, 1, 3000));
  obs("revents=%s", pollbits(p.revents));
}

CASE(poll_peer_closed, "poll", 0, "poll=1@now revents=IN|OUT|RDHUP") {
  int c, s;
  pair(c, s);
  close(c);
  pollfd p = {s, POLLIN | POLLOUT | POLLRDHUP, 0};
  T("poll", poll(&p, 1, 2000));
  // what the peer's FIN shows once it has arrived
  if (!(p.revents & POLLRDHUP)) poll(&p, 1, 1000);
  obs("revents=%s", pollbits(p.revents));
}

CASE(poll_closed_fd_nval, "poll", 0, "poll=1@now revents=NVAL") {
  int c, s;
  pair(c, s);
  close(c);
  pollfd p = {c, POLLIN, 0};
  T("poll", poll(&p, 1, 100));
  obs("revents=%s", pollbits(p.revents));
}

CASE(poll_nfds_past_rlimit, "poll", 0, "poll=-1:EINVAL@now") {
  int c, s;
  pair(c, s);
  rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  size_t n = rl.rlim_cur + 1;
  std::vector<pollfd> v(n, pollfd{-1, 0, 0});
  v[0] = {s, POLLIN, 0};
  T("poll", poll(v.data(), n, 100));
}

CASE(poll_nfds_huge, "poll", 0, "poll=-1:EINVAL@now") {
  int c, s;
  pair(c, s);
  pollfd p = {s, POLLIN, 0};
  int (*volatile poll_)(pollfd *, nfds_t, int) = poll;  // past _FORTIFY_SOURCE's check of the array's size
  T("poll", poll_(&p, (nfds_t)1 << 31, 100));
}

CASE(select_read_after_data, "poll", DATA, "select=1@after-peer set=1") {
  int c, s;
  pair(c, s);
  later(PEER_MS, [c] { send(c, "d", 1, 0); });
  fd_set r;
  FD_ZERO(&r);
  FD_SET(s, &r);
  timeval tv = {3, 0};
  T("select", select(s + 1, &r, nullptr, nullptr, &tv));
  obs("set=%d", FD_ISSET(s, &r) ? 1 : 0);
}

CASE(select_write_connected, "poll", 0, "select=1@now read=0 write=1") {
  int c, s;
  pair(c, s);
  fd_set r, w;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_SET(c, &r);
  FD_SET(c, &w);
  timeval tv = {1, 0};
  T("select", select(c + 1, &r, &w, nullptr, &tv));
  obs("read=%d write=%d", FD_ISSET(c, &r) ? 1 : 0, FD_ISSET(c, &w) ? 1 : 0);
}

CASE(select_timeout, "poll", 0, "select=0@now") {
  int c, s;
  pair(c, s);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(s, &r);
  timeval tv = {0, 100000};
  T("select", select(s + 1, &r, nullptr, nullptr, &tv));
}

static int ep_with(int fd, unsigned events) {
  int ep = epoll_create1(0);
  epoll_event e{};
  e.events = events;
  e.data.fd = fd;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e)) setup_failed("epoll_ctl");
  return ep;
}

static void ep_wait(int ep, int ms) {
  epoll_event e{};
  long n = T("epoll_wait", epoll_wait(ep, &e, 1, ms));
  if (n > 0) obs("events=%s", epollbits(e.events));
}

CASE(epoll_level_in, "poll", DATA, "epoll_wait=1@after-peer events=IN epoll_wait=1@now events=IN") {
  int c, s;
  pair(c, s);
  int ep = ep_with(s, EPOLLIN);
  later(PEER_MS, [c] { send(c, "d", 1, 0); });
  ep_wait(ep, 3000);
  ep_wait(ep, 100);  // level-triggered: still readable
}

CASE(epoll_edge_in, "poll", DATA, "epoll_wait=1@after-peer events=IN epoll_wait=0@now epoll_wait=1@after-peer events=IN") {
  int c, s;
  pair(c, s);
  int ep = ep_with(s, EPOLLIN | EPOLLET);
  later(PEER_MS, [c] { send(c, "d", 1, 0); });
  ep_wait(ep, 3000);
  ep_wait(ep, 100);  // edge-triggered: no new edge
  later(PEER_MS, [c] { send(c, "e", 1, 0); });
  ep_wait(ep, 3000);  // more data: a new edge
}

CASE(epoll_out_connected, "poll", 0, "epoll_wait=1@now events=OUT") {
  int c, s;
  pair(c, s);
  int ep = ep_with(c, EPOLLIN | EPOLLOUT);
  ep_wait(ep, 1000);
}

CASE(epoll_rdhup_peer_shutdown, "poll", 0, "epoll_wait=1@after-peer events=IN|RDHUP") {
  int c, s;
  pair(c, s);
  int ep = ep_with(s, EPOLLIN | EPOLLRDHUP);
  later(PEER_MS, [c] { shutdown(c, SHUT_WR); });
  ep_wait(ep, 3000);
}

CASE(epoll_listener_on_connect, "poll", 0, "epoll_wait=1@after-peer events=IN") {
  int l = listener();
  int ep = ep_with(l, EPOLLIN);
  later(PEER_MS, [] { (void)dial(LADDR, LLEN); pause(); });
  ep_wait(ep, 3000);
}

CASE(epoll_ctl_mod_del, "poll", 0, "mod=0 epoll_wait=1@now events=OUT del=0 del2=-1:ENOENT add=0 add2=-1:EEXIST") {
  int c, s;
  pair(c, s);
  int ep = ep_with(c, EPOLLIN);
  epoll_event e{};
  e.events = EPOLLOUT;
  e.data.fd = c;
  R("mod", epoll_ctl(ep, EPOLL_CTL_MOD, c, &e));
  ep_wait(ep, 1000);
  R("del", epoll_ctl(ep, EPOLL_CTL_DEL, c, nullptr));
  R("del2", epoll_ctl(ep, EPOLL_CTL_DEL, c, nullptr));
  R("add", epoll_ctl(ep, EPOLL_CTL_ADD, c, &e));
  R("add2", epoll_ctl(ep, EPOLL_CTL_ADD, c, &e));
}

CASE(epoll_oneshot, "poll", DATA, "epoll_wait=1@now events=IN epoll_wait=0@now") {
  int c, s;
  pair(c, s);
  int ep = ep_with(s, EPOLLIN | EPOLLONESHOT);
  send(c, "a", 1, 0);
  ep_wait(ep, 3000);
  send(c, "b", 1, 0);
  ep_wait(ep, 100);  // disarmed
}

// An epoll descriptor is itself pollable: readable while a wait would
// report something (event loops nest it so: QEMU's ppolls its epoll fd, a
// loop embedding libuv polls uv_backend_fd). Under the preload the epoll fd
// stood for nothing the kernel could see, and such a loop slept for ever.
// The look takes nothing from the set.
CASE(poll_epoll_fd_readable, "poll", DATA,
     "epoll_wait=0@now poll=0@now poll=1@after-peer revents=IN epoll_wait=1@now events=IN") {
  int c, s;
  pair(c, s);
  int ep = ep_with(s, EPOLLIN);
  ep_wait(ep, 0);
  pollfd p = {ep, POLLIN, 0};
  T("poll", poll(&p, 1, 0));
  later(PEER_MS, [c] { send(c, "d", 1, 0); });
  T("poll", poll(&p, 1, 3000));
  obs("revents=%s", pollbits(p.revents));
  ep_wait(ep, 0);
}

// A fresh set with a ready member polls readable at once, and a member that
// is not ready does not make it so.
CASE(poll_epoll_fd_fresh, "poll", 0, "poll=1@now revents=IN poll=0@now") {
  int c, s;
  pair(c, s);
  int ep = ep_with(s, EPOLLOUT);
  pollfd p = {ep, POLLIN, 0};
  T("poll", poll(&p, 1, 0));
  obs("revents=%s", pollbits(p.revents));
  int ep2 = ep_with(s, EPOLLIN);
  p.fd = ep2;
  T("poll", poll(&p, 1, 200));
}

// A look at the epoll fd takes no event from the set: an edge-triggered
// pipe's event is still there for the next wait, a level-triggered one is
// reported once a wait.
CASE(poll_epoll_fd_keeps_events, "poll", 0, "poll=1@now epoll_wait=2@now epoll_wait=1@now") {
  int a[2], b[2];
  if (pipe(a) || pipe(b)) setup_failed("pipe");
  int ep = ep_with(a[0], EPOLLIN | EPOLLET);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = b[0];
  if (epoll_ctl(ep, EPOLL_CTL_ADD, b[0], &e)) setup_failed("epoll_ctl");
  if (write(a[1], "x", 1) != 1 || write(b[1], "y", 1) != 1) setup_failed("write");
  pollfd p = {ep, POLLIN, 0};
  T("poll", poll(&p, 1, 1000));
  epoll_event ev[4];
  T("epoll_wait", epoll_wait(ep, ev, 4, 0));
  T("epoll_wait", epoll_wait(ep, ev, 4, 0));
}

// An epoll set inside another (a library's loop nested in the program's:
// glib in libevent, libuv's backend fd in a Tokio reactor): the outer set
// reports the inner one only while the inner one has something to report,
// and a wait on the outer set sleeps until the peer sends.
CASE(epoll_nested_set, "poll", DATA,
     "epoll_wait=0@now epoll_wait=1@after-peer events=IN epoll_wait=1@now events=IN") {
  int c, s;
  pair(c, s);
  int inner = ep_with(s, EPOLLIN);
  int outer = ep_with(inner, EPOLLIN);
  ep_wait(outer, 0);
  later(PEER_MS, [c] { send(c, "d", 1, 0); });
  ep_wait(outer, 3000);
  ep_wait(inner, 0);
}

// Sets nest as the kernel lets them: not in a loop (ELOOP); a set closed
// leaves the sets it was in.
CASE(epoll_nested_loop_and_close, "poll", 0, "add=0 loop=-1:ELOOP epoll_wait=1@now close=0 epoll_wait=0@now") {
  int a[2];
  if (pipe(a)) setup_failed("pipe");
  int inner = ep_with(a[0], EPOLLIN);
  int outer = epoll_create1(0);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = inner;
  R("add", epoll_ctl(outer, EPOLL_CTL_ADD, inner, &e));
  e.data.fd = outer;
  R("loop", epoll_ctl(inner, EPOLL_CTL_ADD, outer, &e));
  if (write(a[1], "x", 1) != 1) setup_failed("write");
  epoll_event ev[2];
  T("epoll_wait", epoll_wait(outer, ev, 2, 0));
  R("close", close(inner));
  T("epoll_wait", epoll_wait(outer, ev, 2, 0));
}

// epoll_pwait2 (glibc 2.35): epoll_pwait with a timespec.
CASE(epoll_pwait2_in, "poll", DATA, "epoll_pwait2=1@after-peer events=IN epoll_pwait2=0@now") {
  int c, s;
  pair(c, s);
  int ep = ep_with(s, EPOLLIN | EPOLLET);
  later(PEER_MS, [c] { send(c, "d", 1, 0); });
  epoll_event e{};
  timespec ts = {3, 0};
  if (T("epoll_pwait2", epoll_pwait2(ep, &e, 1, &ts, nullptr)) > 0) obs("events=%s", epollbits(e.events));
  ts = {0, 100 * 1000 * 1000};
  T("epoll_pwait2", epoll_pwait2(ep, &e, 1, &ts, nullptr));  // edge-triggered: nothing new
}
