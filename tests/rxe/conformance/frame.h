// sockconf's frame: the observation a case writes, the connections it builds,
// the peer that acts later. Plain BSD socket calls only: under a preload
// (ours, rdma-core's) they become rsockets, without one they are the kernel's.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <vector>

// --- the observation -----------------------------------------------------------------
// A case writes its observation as it goes ("label=value" words): a call is
// announced before it is made ("recv="), its answer follows ("5@now"), so a
// case stopped at its bound shows which call never returned.

void obs(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pend(const char *label);                // " label=" (the call is under way)
void done(long r, int err, double t0, bool timed);  // "r" or "-1:ENAME", with "@class" when TIMED
double mono();
extern std::atomic<double> peer_at;  // when the peer last acted (mono()), 0: never

// R: the call's return value (or -1 and its errno name). T: the same, and when
// it returned: after-peer (the peer acted during the call, and it returned
// after that), now (else, within 1.5 s: room for an RDMA connect in the
// emulated VM; a peer acts PEER_MS after the call began), slow (later).
#define R(label, expr) ({ pend(label); double t0_ = mono(); errno = 0; long r_ = (long)(expr); \
                          done(r_, errno, t0_, false); r_; })
#define T(label, expr) ({ pend(label); double t0_ = mono(); errno = 0; long r_ = (long)(expr); \
                          done(r_, errno, t0_, true); r_; })

// The peer acts MS milliseconds from now, in a thread of its own (peer_at is
// set as it acts). The delay is the thing measured (the call blocked until
// the peer acted), not a stand-in for a condition.
void later(int ms, std::function<void()> fn);
constexpr int PEER_MS = 300;

// --- addresses and connections ---------------------------------------------------
extern sockaddr_storage ADDR;  // the case's address (--addr, or --addr6 for the IPv6 cases)
extern socklen_t ALEN;
extern int FAM;
extern sockaddr_storage LADDR;  // the last listener's address (its port filled in)
extern socklen_t LLEN;

[[noreturn]] void setup_failed(const char *what);  // "setup:WHAT=-1:ENAME", and the case ends
int listener(int backlog = 16);               // bound to ADDR:0, listening; LADDR set
int udp_bound();                              // a UDP socket bound to ADDR:0; LADDR set
int dial(const sockaddr_storage &a, socklen_t len);  // a blocking connect, -1 on failure
// A connected pair over ADDR (c: the client's end, s: the server's), else the case ends.
void pair(int &c, int &s);
int port_of(const sockaddr_storage &a);
sockaddr_storage with_port(const sockaddr_storage &a, int port);
long readn(int fd, void *buf, long n);   // reads until N bytes, EOF or an error
long writen(int fd, const void *buf, long n);
const char *pollbits(int revents);       // "IN|OUT|HUP..." in a fixed order, "0" for none
const char *epollbits(unsigned events);
void fill(void *buf, long n, unsigned seed);
bool same(const void *buf, long n, unsigned seed);  // FILL's bytes?
extern const char *SELF;   // this program (for exec)

struct Case {
  const char *name;
  const char *cls;
  unsigned flags;
  void (*fn)();
  const char *expect;  // the kernel's observation (Linux), "" if not fixed
};
enum : unsigned { DATA = 1, LOOP = 2, V6 = 4, LONG = 8 };

std::vector<Case> &all_cases();
struct Reg {
  explicit Reg(Case c) { all_cases().push_back(c); }
};
// CASE(name, class, flags, expected kernel observation) { body }: one behaviour.
#define CASE(name, cls, flags, expect) \
  static void name();                  \
  static Reg reg_##name({#name, cls, flags, name, expect}); \
  static void name()
