// Cases: UDP.
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "frame.h"

// Two bound UDP sockets: R (its address in ra) and S (in sa).
static void udp_two(int &r, sockaddr_storage &ra, int &s, sockaddr_storage &sa) {
  r = udp_bound();
  ra = LADDR;
  s = udp_bound();
  sa = LADDR;
}

static bool same_addr(const sockaddr_storage &a, const sockaddr_storage &b) {
  if (a.ss_family != b.ss_family || port_of(a) != port_of(b)) return false;
  if (a.ss_family == AF_INET)
    return ((const sockaddr_in &)a).sin_addr.s_addr == ((const sockaddr_in &)b).sin_addr.s_addr;
  return !memcmp(&((const sockaddr_in6 &)a).sin6_addr, &((const sockaddr_in6 &)b).sin6_addr, 16);
}

static void wait_in(int fd) {
  pollfd p = {fd, POLLIN, 0};
  T("poll", poll(&p, 1, 2000));
}

static void sendto_recvfrom() {
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  R("sendto", sendto(s, "datagram", 8, 0, (sockaddr *)&ra, ALEN));
  char b[16] = {0};
  sockaddr_storage from{};
  socklen_t len = sizeof from;
  R("recvfrom", recvfrom(r, b, sizeof b, 0, (sockaddr *)&from, &len));
  obs("data=%s from=%s", b, same_addr(from, sa) ? "sender" : "other");
}

CASE(udp_sendto_recvfrom, "udp", DATA, "sendto=8 recvfrom=8 data=datagram from=sender") { sendto_recvfrom(); }
CASE(udp6_sendto_recvfrom, "udp", DATA | V6, "sendto=8 recvfrom=8 data=datagram from=sender") { sendto_recvfrom(); }

CASE(udp_sendmsg_msg_name, "udp", DATA, "sendmsg=5 recvmsg=5 data=named from=sender") {
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  char d[] = "named";
  iovec v = {d, 5};
  msghdr m{};
  m.msg_name = &ra;
  m.msg_namelen = ALEN;
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  R("sendmsg", sendmsg(s, &m, 0));
  char b[8] = {0};
  sockaddr_storage from{};
  iovec rv = {b, sizeof b};
  msghdr n{};
  n.msg_name = &from;
  n.msg_namelen = sizeof from;
  n.msg_iov = &rv;
  n.msg_iovlen = 1;
  R("recvmsg", recvmsg(r, &n, 0));
  obs("data=%s from=%s", b, same_addr(from, sa) ? "sender" : "other");
}

CASE(udp_connected, "udp", DATA, "connect=0 send=4 recv=4 getpeername=0 data=conn peer=receiver") {
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  R("connect", connect(s, (sockaddr *)&ra, ALEN));
  R("send", send(s, "conn", 4, 0));
  char b[8] = {0};
  R("recv", recv(r, b, sizeof b, 0));
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  R("getpeername", getpeername(s, (sockaddr *)&peer, &len));
  obs("data=%s peer=%s", b, same_addr(peer, ra) ? "receiver" : "other");
}

CASE(udp_send_unconnected, "udp", 0, "send=-1:EDESTADDRREQ") {
  int s = socket(FAM, SOCK_DGRAM, 0);
  R("send", send(s, "x", 1, 0));
}

CASE(udp_recv_dontwait, "udp", 0, "recv=-1:EAGAIN@now") {
  int r = udp_bound();
  char b;
  T("recv", recv(r, &b, 1, MSG_DONTWAIT));
}

CASE(udp_recv_blocks_until_datagram, "udp", DATA, "recv=4@after-peer") {
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  later(PEER_MS, [s, ra] { sendto(s, "late", 4, 0, (const sockaddr *)&ra, ALEN); });
  char b[8];
  T("recv", recv(r, b, sizeof b, 0));
}

CASE(udp_sendmmsg_recvmmsg, "udp", DATA, "sendmmsg=3 poll=1@now recvmmsg=3@now got=one,two,six lens=3,3,3") {
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  char d[3][4] = {"one", "two", "six"};
  iovec v[3];
  mmsghdr m[3]{};
  for (int i = 0; i < 3; i++) {
    v[i] = {d[i], 3};
    m[i].msg_hdr.msg_name = &ra;
    m[i].msg_hdr.msg_namelen = ALEN;
    m[i].msg_hdr.msg_iov = &v[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  R("sendmmsg", sendmmsg(s, m, 3, 0));
  char g[3][8] = {};
  iovec gv[3];
  mmsghdr n[3]{};
  for (int i = 0; i < 3; i++) {
    gv[i] = {g[i], sizeof g[i]};
    n[i].msg_hdr.msg_iov = &gv[i];
    n[i].msg_hdr.msg_iovlen = 1;
  }
  // Without MSG_WAITFORONE: it waits for all three. (With it, the case would
  // time the sender: kernel UDP on one host has queued all three when
  // sendmmsg returns; over RDMA, as to another host, they are on their way.)
  timespec ts = {2, 0};
  wait_in(r);
  T("recvmmsg", recvmmsg(r, n, 3, 0, &ts));
  obs("got=%s,%s,%s lens=%u,%u,%u", g[0], g[1], g[2], n[0].msg_len, n[1].msg_len, n[2].msg_len);
}

CASE(udp_truncated, "udp", DATA, "poll=1@now recvmsg=10 trunc=1 poll=1@now recv_trunc=100") {
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  char d[100];
  fill(d, sizeof d, 3);
  sendto(s, d, sizeof d, 0, (sockaddr *)&ra, ALEN);
  char b[10];
  iovec v = {b, sizeof b};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  wait_in(r);
  R("recvmsg", recvmsg(r, &m, 0));
  obs("trunc=%d", !!(m.msg_flags & MSG_TRUNC));
  sendto(s, d, sizeof d, 0, (sockaddr *)&ra, ALEN);
  wait_in(r);
  R("recv_trunc", recv(r, b, sizeof b, MSG_TRUNC));
}

CASE(udp_peek_then_read, "udp", DATA, "poll=1@now peek=5 recv=5 recv=6 data=first,first,second") {
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  sendto(s, "first", 5, 0, (sockaddr *)&ra, ALEN);
  sendto(s, "second", 6, 0, (sockaddr *)&ra, ALEN);
  char a[8] = {0}, b[8] = {0}, c[8] = {0};
  wait_in(r);
  R("peek", recv(r, a, sizeof a, MSG_PEEK));
  R("recv", recv(r, b, sizeof b, 0));
  R("recv", recv(r, c, sizeof c, 0));
  obs("data=%s,%s,%s", a, b, c);
}

CASE(udp_datagram_8000_bytes, "udp", DATA, "sendto=8000 poll=1@now recv=8000") {
  // A datagram larger than the receive buffer (Linux takes one into an empty
  // queue) and than one RDMA datagram (rsocket(7): EMSGSIZE past the port's MTU).
  int r, s;
  sockaddr_storage ra, sa;
  udp_two(r, ra, s, sa);
  int sz = 1;
  setsockopt(r, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  static char d[8000], b[8000];
  fill(d, sizeof d, 4);
  R("sendto", sendto(s, d, sizeof d, 0, (sockaddr *)&ra, ALEN));
  pollfd p = {r, POLLIN, 0};
  T("poll", poll(&p, 1, 1000));
  R("recv", recv(r, b, sizeof b, MSG_DONTWAIT));
}

CASE(udp_poll_writable, "udp", 0, "poll=1@now revents=OUT") {
  int r = udp_bound();
  pollfd p = {r, POLLIN | POLLOUT, 0};
  T("poll", poll(&p, 1, 100));
  obs("revents=%s", pollbits(p.revents));
}

CASE(udp_getsockname_bound, "udp", 0, "bind=0 getsockname=0 len=16 port=set") {
  int r = socket(FAM, SOCK_DGRAM, 0);
  R("bind", bind(r, (sockaddr *)&ADDR, ALEN));
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  R("getsockname", getsockname(r, (sockaddr *)&a, &len));
  obs("len=%u port=%s", len, port_of(a) ? "set" : "0");
}

CASE(udp_shutdown_unconnected, "udp", 0, "shutdown=-1:ENOTCONN") {
  int r = udp_bound();
  R("shutdown", shutdown(r, SHUT_RDWR));
}

// Two UDP sockets with SO_REUSEADDR on one address and port (mDNS and SSDP
// responders, a restarted daemon beside its old self): Linux lets both bind;
// a datagram sent to the port reaches one of them. On the device's address
// or the wildcard one (what such responders bind).
static void reuseaddr_two_bound(bool wildcard) {
  int one = 1;
  int a = socket(FAM, SOCK_DGRAM, 0), b = socket(FAM, SOCK_DGRAM, 0);
  setsockopt(a, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(b, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage at = ADDR;
  if (wildcard && FAM == AF_INET) ((sockaddr_in &)at).sin_addr.s_addr = htonl(INADDR_ANY);
  if (wildcard && FAM == AF_INET6) ((sockaddr_in6 &)at).sin6_addr = in6addr_any;
  R("bind", bind(a, (sockaddr *)&at, ALEN));
  socklen_t len = ALEN;
  getsockname(a, (sockaddr *)&at, &len);
  R("bind2", bind(b, (sockaddr *)&at, len));
  sockaddr_storage to = with_port(ADDR, port_of(at));
  int s = udp_bound();
  R("sendto", sendto(s, "datagram", 8, 0, (sockaddr *)&to, ALEN));
  int received = 0;
  double end = mono() + 2;
  while (mono() < end) {
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    if (poll(p, 2, 200) <= 0) continue;
    char buf[16];
    for (const pollfd &q : p)
      if ((q.revents & POLLIN) && recv(q.fd, buf, sizeof buf, MSG_DONTWAIT) == 8) ++received;
  }
  obs("received=%d", received);
}

CASE(udp_reuseaddr_two_bound, "udp", DATA, "bind=0 bind2=0 sendto=8 received=1") { reuseaddr_two_bound(false); }
CASE(udp_reuseaddr_two_bound_any, "udp", DATA, "bind=0 bind2=0 sendto=8 received=1") { reuseaddr_two_bound(true); }
