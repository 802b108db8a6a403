/*
 * Helpers shared by the bundled tools (rping, ucmatose, udaddy, mckey,
 * cmtime, rdma_server, rdma_client): messages, address parsing, bounded
 * waits for CM events and completions, option parsing, data patterns.
 *
 * Conventions: every message starts with the tool's name; errors go to
 * stderr and say which call failed and why. No wait in here is unbounded
 * unless the caller passes WAIT_FOREVER (a server waiting for its first
 * client, nothing else).
 */
#ifndef RDMACM_EXAMPLES_COMMON_H
#define RDMACM_EXAMPLES_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#define WAIT_FOREVER (-1)

/* --- messages ------------------------------------------------------------ */

/* Sets the name printed before every message; makes stdout line-buffered so
 * that scripts reading a pipe see each line when it happens. */
void tool_init(const char *name);
extern const char *tool_name;
extern int tool_debug; /* -d: print debug_msg() lines */

void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "<tool>: <call> failed: <strerror(errno)>" */
void errno_msg(const char *call);
/* "<tool>: <what>: <event> (status N: meaning)" */
void event_msg(const char *what, const struct rdma_cm_event *ev);
void debug_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A human reading of an event's status (a negative errno, an IB CM reject
 * reason for RDMA_CM_EVENT_REJECTED, or for a UD id's REJECTED or
 * UNREACHABLE a SIDR REP status). */
const char *event_status_str(const struct rdma_cm_event *ev);

/* --- time limits ----------------------------------------------------------- */

/* How long to wait for a peer that has already shown up (a completion, the
 * next CM event of a connection): RDMACM_TOOLS_TIMEOUT seconds from the
 * environment, default 20 s. */
int peer_timeout_ms(void);
int64_t now_ms(void);
/* Milliseconds left until deadline (never negative); WAIT_FOREVER stays so. */
int ms_left(int64_t deadline);
int64_t deadline_in(int timeout_ms);

/* For synchronous calls that cannot take a time limit (the endpoint API):
 * unless disarmed (watchdog_arm(0, NULL)) within timeout_ms, prints
 * "<tool>: timed out after N ms: <what>" and ends the process (status 255). */
void watchdog_arm(int timeout_ms, const char *what);

/* --- options and addresses ----------------------------------------------- */

/* Parses a whole decimal (or 0x hex) integer in [min, max]; on error prints
 * "<tool>: invalid <what> '<s>'" and returns -1. */
int parse_int(const char *s, const char *what, long min, long max, int *out);

/* -t: a type of service, 0 to 255, into *tos; sets *set. */
int parse_tos(const char *s, uint8_t *tos, bool *set);

/* -p of udaddy and mckey: a port space by number, RDMA_PS_UDP or
 * RDMA_PS_IPOIB. */
int parse_ud_port_space(const char *s, int *ps);
/* After getopt(): -1 after a message if an argument is left over, else 0. */
int no_arguments_left(int argc, char **argv);

/* getaddrinfo() of host (numeric or name) into *ss, port set to port (host
 * order). Returns 0 or the EAI_* code after printing why. */
int parse_addr(const char *host, uint16_t port, struct sockaddr_storage *ss);
void set_port(struct sockaddr *sa, uint16_t port);
/* "a.b.c.d:port" or "[v6]:port" into buf. */
const char *addr_str(const struct sockaddr *sa, char *buf, size_t len);

/* rdma_getaddrinfo() for a client (dst, optionally bound to src) or, with
 * RAI_PASSIVE in hints, a server (src). Prints why on failure. */
int get_rdma_addr(const char *src, const char *dst, const char *port,
		  const struct rdma_addrinfo *hints, struct rdma_addrinfo **res);

/* -f of ucmatose and udaddy: "ip" (numeric), "gid" (AF_IB) or "name", by
 * prefix as rdma-core reads it; anything else warns and means "name". */
void apply_addr_format(const char *arg, struct rdma_addrinfo *hints);

/* rdma_create_event_channel() with a clear message (no device, no module). */
struct rdma_event_channel *open_event_channel(void);

/* --- CM events ------------------------------------------------------------ */

/* Next event on ch within timeout_ms (WAIT_FOREVER: no limit). Returns 0, or
 * -1 with errno (ETIMEDOUT when nothing came). Prints nothing. */
int get_cm_event(struct rdma_event_channel *ch, int timeout_ms, struct rdma_cm_event **ev);

/* Waits for an event of type want on ch. On success *ev holds it (ack it);
 * otherwise prints "<what>: ..." naming the event that came instead, or the
 * timeout, acks whatever came, and returns -1 (with errno set; for an error
 * event, *status gets its status when status is not NULL). */
int expect_cm_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
		    int timeout_ms, const char *what, struct rdma_cm_event **ev, int *status);

/* --- completions ---------------------------------------------------------- */

/* Polls cq for up to max completions, waiting on its completion channel (the
 * CQ must have been created with it) until at least one is there or the
 * deadline passes. Returns the number polled, or -1 with errno (ETIMEDOUT). */
int poll_cq_until(struct ibv_cq *cq, struct ibv_comp_channel *cc, struct ibv_wc *wc,
		  int max, int64_t deadline);
/* Prints "<what>: completion <status string> (status N, vendor error V)". */
void wc_msg(const char *what, const struct ibv_wc *wc);

/* A completion channel and a CQ of cqe entries (context ctx) on it.
 * Returns 0, or -1 after a message. */
int create_cq(struct ibv_context *verbs, int cqe, void *ctx, struct ibv_comp_channel **cc,
	      struct ibv_cq **cq);
/* Destroys what create_cq() made (either may be NULL). */
void destroy_cq(struct ibv_cq *cq, struct ibv_comp_channel *cc);

/* Sets O_NONBLOCK on fd; -1 on failure (errno). */
int set_nonblock(int fd);

/* --- data ------------------------------------------------------------------- */

/* A byte pattern that depends on (seed, offset), to check a transfer end to end. */
void fill_pattern(void *buf, size_t len, uint32_t seed);
/* Returns the first offset that differs from the pattern, or -1. */
long check_pattern(const void *buf, size_t len, uint32_t seed);

#endif
