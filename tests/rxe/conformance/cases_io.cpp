// Cases: the send and receive families, shutdown, close.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "frame.h"

// --- send and receive -------------------------------------------------------------------

CASE(recv_peek, "sendrecv", DATA, "peek=5@now recv=5 same=1") {
  int c, s;
  pair(c, s);
  send(c, "hello", 5, 0);
  char a[8] = {0}, b[8] = {0};
  T("peek", recv(s, a, 5, MSG_PEEK | MSG_WAITALL));
  R("recv", recv(s, b, 5, 0));
  obs("same=%d", !strcmp(a, "hello") && !strcmp(b, "hello"));
}

CASE(recv_waitall, "sendrecv", DATA, "recv=6@after-peer data=abcdef") {
  int c, s;
  pair(c, s);
  send(c, "abc", 3, 0);
  later(PEER_MS, [c] { send(c, "def", 3, 0); });
  char b[8] = {0};
  T("recv", recv(s, b, 6, MSG_WAITALL));
  obs("data=%s", b);
}

CASE(recv_dontwait_eagain, "sendrecv", 0, "recv=-1:EAGAIN@now") {
  int c, s;
  pair(c, s);
  char b;
  T("recv", recv(s, &b, 1, MSG_DONTWAIT));
}

CASE(recv_blocks_until_data, "sendrecv", DATA, "recv=3@after-peer") {
  int c, s;
  pair(c, s);
  later(PEER_MS, [c] { send(c, "xyz", 3, 0); });
  char b[8];
  T("recv", recv(s, b, sizeof b, 0));
}

CASE(recv_zero_bytes_blocks, "sendrecv", 0, "recv=0@after-peer") {
  // Linux: a blocking receive of 0 bytes waits for a byte (tcp_recvmsg's target is at least 1).
  int c, s;
  pair(c, s);
  later(PEER_MS, [c] { send(c, "x", 1, 0); });
  char b;
  T("recv", recv(s, &b, 0, 0));
}

CASE(send_zero_bytes, "sendrecv", 0, "send=0@now peer=-1:EAGAIN") {
  int c, s;
  pair(c, s);
  T("send", send(c, "", 0, 0));
  char b;
  R("peer", recv(s, &b, 1, MSG_DONTWAIT));
}

CASE(send_nosignal_peer_closed, "sendrecv", DATA, "recv=0@now send=EPIPE") {
  int c, s;
  pair(c, s);
  close(s);
  char b;
  T("recv", recv(c, &b, 1, 0));
  // The first send may be taken (the peer answers with a reset); a later one fails.
  long r = 0;
  int i;
  for (i = 0; i < 20 && r >= 0; i++) {
    r = send(c, "x", 1, MSG_NOSIGNAL);
    if (r >= 0) {
      pollfd p = {c, POLLERR, 0};
      poll(&p, 1, 200);
    }
  }
  obs("send=%s", r < 0 ? strerrorname_np(errno) : "ok");
}

// A server that answers a client that already closed: the kernel takes the
// first send (CLOSE_WAIT; the peer's host answers with a reset), the next
// one fails. CPython's NetworkConnectionBehaviourTest.testOutsideTimeout
// sends so.
CASE(send_after_peer_close_first_taken, "sendrecv", DATA, "recv=0@now send1=1@now send2=-1:EPIPE@now") {
  int c, s;
  pair(c, s);
  close(s);
  char b;
  T("recv", recv(c, &b, 1, 0));
  T("send1", send(c, "x", 1, MSG_NOSIGNAL));
  pollfd p = {c, POLLERR, 0};
  poll(&p, 1, 500);  // the reset, on the kernel
  T("send2", send(c, "y", 1, MSG_NOSIGNAL));
}

static std::atomic<int> sigpipes{0};

CASE(send_sigpipe, "sendrecv", DATA, "send=-1:EPIPE sigpipe=1") {
  signal(SIGPIPE, [](int) { sigpipes++; });
  int c, s;
  pair(c, s);
  shutdown(c, SHUT_WR);
  R("send", send(c, "x", 1, 0));
  obs("sigpipe=%d", sigpipes.load());
}

CASE(send_msg_more, "sendrecv", DATA, "send=2 send=2 recv=4 data=abcd") {
  int c, s;
  pair(c, s);
  R("send", send(c, "ab", 2, MSG_MORE));
  R("send", send(c, "cd", 2, 0));
  char b[8] = {0};
  R("recv", recv(s, b, 4, MSG_WAITALL));
  obs("data=%s", b);
}

CASE(send_oob, "sendrecv", DATA, "send=1 poll=1@now recv_oob=1 byte=a") {
  int c, s;
  pair(c, s);
  R("send", send(c, "a", 1, MSG_OOB));
  pollfd p = {s, POLLPRI, 0};
  T("poll", poll(&p, 1, 2000));
  char b = 0;
  R("recv_oob", recv(s, &b, 1, MSG_OOB));
  obs("byte=%c", b ? b : '-');
}

CASE(readv_writev, "sendrecv", DATA, "writev=15 readv=15 parts=abc,defg,hijklmno") {
  int c, s;
  pair(c, s);
  char w1[] = "abc", w2[] = "defgh", w3[] = "ijklmno";
  iovec wv[] = {{w1, 3}, {w2, 5}, {w3, 7}};
  R("writev", writev(c, wv, 3));
  char peek[15];
  recv(s, peek, 15, MSG_PEEK | MSG_WAITALL);
  char r1[4] = {0}, r2[5] = {0}, r3[9] = {0};
  iovec rv[] = {{r1, 3}, {r2, 4}, {r3, 8}};
  R("readv", readv(s, rv, 3));
  obs("parts=%s,%s,%s", r1, r2, r3);
}

static void iov_past_max(bool send_side, size_t n) {
  int c, s;
  pair(c, s);
  static char b[8];
  std::vector<iovec> v(n < 4096 ? n : 4096, iovec{b, 1});
  msghdr m{};
  m.msg_iov = v.data();
  m.msg_iovlen = n;  // past the vector's length too: the call must refuse before reading it
  send(c, "x", 1, 0);
  if (send_side)
    R("sendmsg", sendmsg(c, &m, MSG_NOSIGNAL));
  else
    T("recvmsg", recvmsg(s, &m, 0));
}

CASE(sendmsg_iovlen_past_max, "sendrecv", 0, "sendmsg=-1:EMSGSIZE") { iov_past_max(true, IOV_MAX + 1); }
CASE(recvmsg_iovlen_past_max, "sendrecv", 0, "recvmsg=-1:EMSGSIZE@now") { iov_past_max(false, IOV_MAX + 1); }
CASE(sendmsg_iovlen_huge, "sendrecv", 0, "sendmsg=-1:EMSGSIZE") { iov_past_max(true, ((size_t)1 << 32) + 1); }
CASE(recvmsg_iovlen_huge, "sendrecv", 0, "recvmsg=-1:EMSGSIZE@now") { iov_past_max(false, ((size_t)1 << 32) + 1); }

CASE(sendmsg_recvmsg, "sendrecv", DATA, "sendmsg=5 recvmsg=5 parts=12,345 flags=0") {
  int c, s;
  pair(c, s);
  char a[] = "12", b[] = "345";
  iovec wv[] = {{a, 2}, {b, 3}};
  msghdr m{};
  m.msg_iov = wv;
  m.msg_iovlen = 2;
  R("sendmsg", sendmsg(c, &m, 0));
  char r1[3] = {0}, r2[4] = {0};
  iovec rv[] = {{r1, 2}, {r2, 3}};
  msghdr n{};
  n.msg_iov = rv;
  n.msg_iovlen = 2;
  char peek[5];
  recv(s, peek, 5, MSG_PEEK | MSG_WAITALL);
  R("recvmsg", recvmsg(s, &n, 0));
  obs("parts=%s,%s flags=%d", r1, r2, n.msg_flags);
}

CASE(sendfile_file, "sendrecv", DATA, "sendfile=65536 read=65536 offset=65536 data=ok") {
  int c, s;
  pair(c, s);
  char path[] = "/tmp/sockconf.XXXXXX";
  int f = mkstemp(path);
  if (f < 0) setup_failed("mkstemp");
  unlink(path);
  static char buf[65536], got[65536];
  fill(buf, sizeof buf, 7);
  if (write(f, buf, sizeof buf) != (long)sizeof buf) setup_failed("write");
  off_t off = 0;
  long n = 0;
  std::thread t([&] { n = readn(s, got, sizeof got); });
  R("sendfile", sendfile(c, f, &off, sizeof buf));
  t.join();
  obs("read=%ld offset=%ld data=%s", n, (long)off, same(got, sizeof got, 7) ? "ok" : "bad");
}

CASE(send_1mib_read_all, "sendrecv", DATA, "send=1048576 read=1048576 data=ok") {
  int c, s;
  pair(c, s);
  static char buf[1 << 20], got[1 << 20];
  fill(buf, sizeof buf, 8);
  long n = 0;
  std::thread t([&] { n = readn(s, got, sizeof got); });
  R("send", writen(c, buf, sizeof buf));
  t.join();
  obs("read=%ld data=%s", n, same(got, sizeof got, 8) ? "ok" : "bad");
}

CASE(read_write_calls, "sendrecv", DATA, "write=5 read=5 data=hello") {
  int c, s;
  pair(c, s);
  R("write", write(c, "hello", 5));
  char b[8] = {0};
  recv(s, b, 5, MSG_PEEK | MSG_WAITALL);
  R("read", read(s, b, sizeof b));
  obs("data=%s", b);
}

// --- shutdown --------------------------------------------------------------------------

CASE(shutdown_wr_then_send, "shutdown", 0, "shutdown=0 send=-1:EPIPE@now") {
  int c, s;
  pair(c, s);
  R("shutdown", shutdown(c, SHUT_WR));
  T("send", send(c, "x", 1, MSG_NOSIGNAL));
}

CASE(shutdown_rdwr_then_send, "shutdown", 0, "shutdown=0 send=-1:EPIPE@now") {
  int c, s;
  pair(c, s);
  R("shutdown", shutdown(c, SHUT_RDWR));
  T("send", send(c, "x", 1, MSG_NOSIGNAL));
}

CASE(shutdown_wr_peer_eof, "shutdown", DATA, "recv=1 recv=0@after-peer send_back=1 recv_back=1") {
  int c, s;
  pair(c, s);
  send(c, "z", 1, 0);
  later(PEER_MS, [c] { shutdown(c, SHUT_WR); });
  char b[4];
  R("recv", recv(s, b, sizeof b, 0));
  T("recv", recv(s, b, sizeof b, 0));
  R("send_back", send(s, "y", 1, MSG_NOSIGNAL));
  R("recv_back", recv(c, b, 1, 0));
}

CASE(shutdown_rd_wakes_reader, "shutdown", 0, "recv=0@after-peer") {
  int c, s;
  pair(c, s);
  later(PEER_MS, [s] { shutdown(s, SHUT_RD); });
  char b;
  T("recv", recv(s, &b, 1, 0));
}

CASE(shutdown_rd_then_recv, "shutdown", 0, "shutdown=0 recv=0@now") {
  int c, s;
  pair(c, s);
  R("shutdown", shutdown(s, SHUT_RD));
  char b;
  T("recv", recv(s, &b, 1, 0));
}

static void poll_after(int how) {
  int c, s;
  pair(c, s);
  R("shutdown", shutdown(c, how));
  pollfd p = {c, POLLIN | POLLOUT | POLLRDHUP, 0};
  T("poll", poll(&p, 1, 1000));
  obs("revents=%s", pollbits(p.revents));
}

CASE(shutdown_poll_wr, "shutdown", 0, "shutdown=0 poll=1@now revents=OUT") { poll_after(SHUT_WR); }
CASE(shutdown_poll_rd, "shutdown", 0, "shutdown=0 poll=1@now revents=IN|OUT|RDHUP") { poll_after(SHUT_RD); }
CASE(shutdown_poll_rdwr, "shutdown", 0, "shutdown=0 poll=1@now revents=IN|OUT|HUP|RDHUP") { poll_after(SHUT_RDWR); }

CASE(shutdown_poll_peer_wr, "shutdown", 0, "poll=1@after-peer revents=IN|OUT|RDHUP") {
  int c, s;
  pair(c, s);
  later(PEER_MS, [c] { shutdown(c, SHUT_WR); });
  pollfd p = {s, POLLIN | POLLRDHUP, 0};
  T("poll", poll(&p, 1, 3000));
  p.events |= POLLOUT;
  poll(&p, 1, 0);
  obs("revents=%s", pollbits(p.revents));
}

CASE(shutdown_unconnected, "shutdown", 0, "shutdown=-1:ENOTCONN") {
  int fd = socket(FAM, SOCK_STREAM, 0);
  R("shutdown", shutdown(fd, SHUT_RDWR));
}

CASE(shutdown_bad_how, "shutdown", 0, "shutdown=-1:EINVAL") {
  int c, s;
  pair(c, s);
  R("shutdown", shutdown(c, 7));
}

CASE(shutdown_twice, "shutdown", 0, "shutdown=0 shutdown2=0") {
  int c, s;
  pair(c, s);
  R("shutdown", shutdown(c, SHUT_WR));
  R("shutdown2", shutdown(c, SHUT_WR));
}

// --- close ------------------------------------------------------------------------------

CASE(close_peer_reads_then_eof, "close", DATA, "read=100000 recv=0@now data=ok") {
  int c, s;
  pair(c, s);
  static char buf[100000], got[100000];
  fill(buf, sizeof buf, 9);
  std::thread t([&] {
    writen(c, buf, sizeof buf);
    close(c);
  });
  R("read", readn(s, got, sizeof got));
  char b;
  T("recv", recv(s, &b, 1, 0));
  t.join();
  obs("data=%s", same(got, sizeof got, 9) ? "ok" : "bad");
}

CASE(close_linger_zero_resets, "close", 0, "setsockopt=0 recv=-1:ECONNRESET@after-peer") {
  int c, s;
  pair(c, s);
  linger lg = {1, 0};
  R("setsockopt", setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
  later(PEER_MS, [c] { close(c); });
  char b;
  T("recv", recv(s, &b, 1, 0));
}

CASE(close_linger_on_data_arrives, "close", DATA, "close=0@now read=50000 recv=0 data=ok") {
  int c, s;
  pair(c, s);
  linger lg = {1, 2};
  setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  static char buf[50000], got[50000];
  fill(buf, sizeof buf, 10);
  writen(c, buf, sizeof buf);
  long n = 0;
  std::thread t([&] { n = readn(s, got, sizeof got); });
  T("close", close(c));
  t.join();
  obs("read=%ld", n);
  char b;
  R("recv", recv(s, &b, 1, 0));
  obs("data=%s", same(got, sizeof got, 10) ? "ok" : "bad");
}

CASE(close_wakes_peer_poll, "close", 0, "poll=1@after-peer revents=IN") {
  int c, s;
  pair(c, s);
  later(PEER_MS, [c] { close(c); });
  pollfd p = {s, POLLIN, 0};
  T("poll", poll(&p, 1, 3000));
  obs("revents=%s", pollbits(p.revents));
}
