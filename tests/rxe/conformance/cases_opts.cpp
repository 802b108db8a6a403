// Cases: socket options (those rsocket(7) and rdma-core's rsocket(7) list, and
// a few every server sets), getsockname/getpeername, fcntl and ioctl, dup.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <unistd.h>

#include "frame.h"

// --- options ----------------------------------------------------------------------------

// Sets LEVEL/NAME to V on a connected socket (or a fresh one with FRESH) and reads it back.
static void int_opt(int level, int name, int v, bool fresh = false) {
  int c, s;
  if (fresh)
    c = socket(FAM, SOCK_STREAM, 0);
  else
    pair(c, s);
  R("set", setsockopt(c, level, name, &v, sizeof v));
  int got = -1;
  socklen_t len = sizeof got;
  R("get", getsockopt(c, level, name, &got, &len));
  obs("value=%d len=%u", got, len);
}

CASE(opt_reuseaddr, "sockopt", 0, "set=0 get=0 value=1 len=4") { int_opt(SOL_SOCKET, SO_REUSEADDR, 1, true); }
CASE(opt_keepalive, "sockopt", 0, "set=0 get=0 value=1 len=4") { int_opt(SOL_SOCKET, SO_KEEPALIVE, 1); }
CASE(opt_oobinline, "sockopt", 0, "set=0 get=0 value=1 len=4") { int_opt(SOL_SOCKET, SO_OOBINLINE, 1); }
CASE(opt_nodelay, "sockopt", 0, "set=0 get=0 value=1 len=4") { int_opt(IPPROTO_TCP, TCP_NODELAY, 1); }
CASE(opt_keepidle, "sockopt", 0, "set=0 get=0 value=30 len=4") { int_opt(IPPROTO_TCP, TCP_KEEPIDLE, 30); }
CASE(opt_keepintvl, "sockopt", 0, "set=0 get=0 value=5 len=4") { int_opt(IPPROTO_TCP, TCP_KEEPINTVL, 5); }
CASE(opt_keepcnt, "sockopt", 0, "set=0 get=0 value=4 len=4") { int_opt(IPPROTO_TCP, TCP_KEEPCNT, 4); }
// Linux doubles what is set (and keeps a floor): a program sees twice its value.
CASE(opt_rcvbuf, "sockopt", 0, "set=0 get=0 value=131072 len=4") { int_opt(SOL_SOCKET, SO_RCVBUF, 65536); }
CASE(opt_sndbuf, "sockopt", 0, "set=0 get=0 value=131072 len=4") { int_opt(SOL_SOCKET, SO_SNDBUF, 65536); }

CASE(opt_v6only, "sockopt", V6, "set=0 get=0 value=1") {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  int v = 1, got = -1;
  socklen_t len = sizeof got;
  R("set", setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof v));
  R("get", getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &got, &len));
  obs("value=%d", got);
}

CASE(opt_linger, "sockopt", 0, "set=0 get=0 onoff=1 linger=5 len=8") {
  int c, s;
  pair(c, s);
  linger lg = {1, 5}, got = {-1, -1};
  socklen_t len = sizeof got;
  R("set", setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
  R("get", getsockopt(c, SOL_SOCKET, SO_LINGER, &got, &len));
  obs("onoff=%d linger=%d len=%u", got.l_onoff, got.l_linger, len);
}

CASE(opt_error_connected, "sockopt", 0, "get=0 value=0") {
  int c, s;
  pair(c, s);
  int err = -1;
  socklen_t len = sizeof err;
  R("get", getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len));
  obs("value=%d", err);
}

CASE(opt_maxseg, "sockopt", 0, "get=0 value=positive") {
  int c, s;
  pair(c, s);
  int v = -1;
  socklen_t len = sizeof v;
  R("get", getsockopt(c, IPPROTO_TCP, TCP_MAXSEG, &v, &len));
  obs("value=%s", v > 0 ? "positive" : "not-positive");
}

CASE(opt_type, "sockopt", 0, "get=0 value=1") {
  int c, s;
  pair(c, s);
  int v = -1;
  socklen_t len = sizeof v;
  R("get", getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &len));
  obs("value=%d", v);
}

CASE(opt_get_negative_optlen, "sockopt", 0, "get=-1:EINVAL") {
  int c, s;
  pair(c, s);
  int v = -1;
  socklen_t len = (socklen_t)-1;
  R("get", getsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, &len));
}

CASE(opt_set_short_optlen, "sockopt", 0, "set=-1:EINVAL") {
  int c, s;
  pair(c, s);
  int v = 1;
  R("set", setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, 1));
}

CASE(opt_unknown_option, "sockopt", 0, "set=-1:ENOPROTOOPT") {
  int c, s;
  pair(c, s);
  int v = 1;
  R("set", setsockopt(c, SOL_SOCKET, 9999, &v, sizeof v));
}

CASE(opt_rcvtimeo, "sockopt", 0, "set=0 recv=-1:EAGAIN@now") {
  int c, s;
  pair(c, s);
  timeval tv = {0, 200000};
  R("set", setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
  char b;
  T("recv", recv(s, &b, 1, 0));
}

// --- names ------------------------------------------------------------------------------

CASE(getpeername_unconnected, "names", 0, "getpeername=-1:ENOTCONN") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  sockaddr_storage a;
  socklen_t len = sizeof a;
  R("getpeername", getpeername(fd, (sockaddr *)&a, &len));
}

CASE(getpeername_listener, "names", 0, "getpeername=-1:ENOTCONN") {
  int l = listener();
  sockaddr_storage a;
  socklen_t len = sizeof a;
  R("getpeername", getpeername(l, (sockaddr *)&a, &len));
}

CASE(getpeername_connected, "names", 0, "getpeername=0 len=16 port=listener's") {
  int c, s;
  pair(c, s);
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  R("getpeername", getpeername(c, (sockaddr *)&a, &len));
  obs("len=%u port=%s", len, port_of(a) == port_of(LADDR) ? "listener's" : "other");
}

CASE(getsockname_bad_len_pointer, "names", 0, "getsockname=-1:EFAULT") {
  int c, s;
  pair(c, s);
  sockaddr_storage a;
  R("getsockname", getsockname(c, (sockaddr *)&a, (socklen_t *)8));
}

CASE(getsockname_bad_addr_pointer, "names", 0, "getsockname=-1:EFAULT") {
  int c, s;
  pair(c, s);
  socklen_t len = sizeof(sockaddr_storage);
  R("getsockname", getsockname(c, (sockaddr *)8, &len));
}

CASE(getsockname_short_len, "names", 0, "getsockname=0 len=16") {
  int c, s;
  pair(c, s);
  sockaddr_storage a{};
  socklen_t len = 4;
  R("getsockname", getsockname(c, (sockaddr *)&a, &len));
  obs("len=%u", len);
}

CASE(getsockname_unbound, "names", 0, "getsockname=0 len=16 family=same port=0") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  R("getsockname", getsockname(fd, (sockaddr *)&a, &len));
  obs("len=%u family=%s port=%d", len, a.ss_family == FAM ? "same" : "other", port_of(a));
}

// --- fcntl, ioctl ------------------------------------------------------------------------

CASE(fcntl_nonblock_roundtrip, "fcntl", 0, "set=0 on=1 recv=-1:EAGAIN@now clear=0 on=0") {
  int c, s;
  pair(c, s);
  int fl = fcntl(c, F_GETFL);
  R("set", fcntl(c, F_SETFL, fl | O_NONBLOCK));
  obs("on=%d", !!(fcntl(c, F_GETFL) & O_NONBLOCK));
  char b;
  T("recv", recv(c, &b, 1, 0));
  R("clear", fcntl(c, F_SETFL, fl & ~O_NONBLOCK));
  obs("on=%d", !!(fcntl(c, F_GETFL) & O_NONBLOCK));
}

CASE(fcntl_cloexec, "fcntl", 0, "before=0 set=0 after=1") {
  int c, s;
  pair(c, s);
  obs("before=%d", fcntl(c, F_GETFD));
  R("set", fcntl(c, F_SETFD, FD_CLOEXEC));
  obs("after=%d", fcntl(c, F_GETFD));
}

CASE(fcntl_getfl_rdwr, "fcntl", 0, "accmode=2") {
  int c, s;
  pair(c, s);
  obs("accmode=%d", fcntl(c, F_GETFL) & O_ACCMODE);
}

CASE(ioctl_fionbio, "fcntl", 0, "ioctl=0 recv=-1:EAGAIN@now") {
  int c, s;
  pair(c, s);
  int on = 1;
  R("ioctl", ioctl(c, FIONBIO, &on));
  char b;
  T("recv", recv(c, &b, 1, 0));
}

CASE(ioctl_fionread, "fcntl", DATA, "ioctl=0 n=5") {
  int c, s;
  pair(c, s);
  send(c, "12345", 5, 0);
  pollfd p = {s, POLLIN, 0};
  poll(&p, 1, 2000);
  int n = -1;
  R("ioctl", ioctl(s, FIONREAD, &n));
  obs("n=%d", n);
}

// --- dup ----------------------------------------------------------------------------------

CASE(dup_keeps_connection, "dup", DATA, "dup=ok send=3 recv=3 data=dup") {
  int c, s;
  pair(c, s);
  int d = dup(c);
  obs("dup=%s", d >= 0 ? "ok" : strerrorname_np(errno));
  close(c);
  R("send", send(d, "dup", 3, 0));
  char b[4] = {0};
  R("recv", recv(s, b, 3, MSG_WAITALL));
  obs("data=%s", b);
}

CASE(dup2_over_other, "dup", DATA, "dup2=0 send=3 recv=3 data=two") {
  int c, s;
  pair(c, s);
  int other = socket(FAM, SOCK_STREAM, 0);
  R("dup2", dup2(c, other) == other ? 0 : -1);
  close(c);
  R("send", send(other, "two", 3, 0));
  char b[4] = {0};
  R("recv", recv(s, b, 3, MSG_WAITALL));
  obs("data=%s", b);
}

CASE(dup_close_one_no_eof, "dup", 0, "poll=0@now recv=0@after-peer") {
  int c, s;
  pair(c, s);
  int d = dup(c);
  close(c);
  pollfd p = {s, POLLIN, 0};
  T("poll", poll(&p, 1, 200));
  later(PEER_MS, [d] { close(d); });
  char b;
  T("recv", recv(s, &b, 1, 0));
}

CASE(dup_shares_nonblock, "dup", 0, "dup_nonblock=1 recv=-1:EAGAIN@now") {
  int c, s;
  pair(c, s);
  int d = dup(c);
  fcntl(c, F_SETFL, O_NONBLOCK);
  obs("dup_nonblock=%d", !!(fcntl(d, F_GETFL) & O_NONBLOCK));
  char b;
  T("recv", recv(d, &b, 1, 0));
}
