/* Helpers shared by the bundled tools; see common.h. */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

const char *tool_name = "rdmacm-tool";
int tool_debug;

void tool_init(const char *name)
{
	tool_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* --- messages ------------------------------------------------------------ */

void errmsg(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", tool_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void errno_msg(const char *call)
{
	int err = errno;

	errmsg("%s failed: %s (errno %d)", call, strerror(err), err);
	errno = err;
}

void debug_msg(const char *fmt, ...)
{
	va_list ap;

	if (!tool_debug)
		return;
	printf("%s: debug: ", tool_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* IB CM REJ reasons (IBTA table 112) that an rdma_cm user is likely to meet. */
static const char *ib_reject_reason(int reason)
{
	switch (reason) {
	case 1: return "no QP available";
	case 3: return "no resources at the remote side";
	case 4: return "the remote side timed out";
	case 5: return "unsupported request";
	case 8: return "invalid service ID: nothing listens on that port";
	case 10: return "stale connection";
	case 26: return "invalid MTU";
	case 27: return "insufficient responder resources";
	case 28: return "rejected by the remote application";
	case 29: return "invalid RNR retry count";
	default: return "IB CM reject reason";
	}
}

/* IB CM SIDR REP statuses: the answer to a UD "connect" (IBTA table 119). */
static const char *sidr_status(int status)
{
	switch (status) {
	case 1: return "service ID not supported: nothing listens on that port";
	case 2: return "rejected by the remote application";
	case 3: return "no QP at the remote side";
	case 4: return "redirected";
	case 5: return "unsupported SIDR version";
	default: return "SIDR status";
	}
}

const char *event_status_str(const struct rdma_cm_event *ev)
{
	static __thread char buf[96];

	if (ev->status == 0)
		return "ok";
	if (ev->status < 0)
		return strerror(-ev->status);
	/* A UD id's answer is a SIDR REP: the kernel reports a failed one as
	 * UNREACHABLE (or REJECTED) with the REP's status. */
	if (ev->id && (ev->id->ps == RDMA_PS_UDP || ev->id->ps == RDMA_PS_IPOIB) &&
	    (ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE))
		return sidr_status(ev->status);
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return ib_reject_reason(ev->status);
	snprintf(buf, sizeof(buf), "status %d", ev->status);
	return buf;
}

void event_msg(const char *what, const struct rdma_cm_event *ev)
{
	errmsg("%s: %s (status %d: %s)", what, rdma_event_str(ev->event), ev->status,
	       event_status_str(ev));
}

/* --- time limits ----------------------------------------------------------- */

int peer_timeout_ms(void)
{
	static int ms;
	const char *env;

	if (ms)
		return ms;
	ms = 20000;
	env = getenv("RDMACM_TOOLS_TIMEOUT");
	if (env && *env) {
		char *end;
		double s = strtod(env, &end);

		if (*end == '\0' && s > 0 && s < INT_MAX / 1000)
			ms = (int)(s * 1000);
	}
	return ms;
}

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t deadline_in(int timeout_ms)
{
	return timeout_ms < 0 ? WAIT_FOREVER : now_ms() + timeout_ms;
}

int ms_left(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return WAIT_FOREVER;
	left = deadline - now_ms();
	return left > 0 ? (int)left : 0;
}

static char watchdog_text[256];
static size_t watchdog_len;

static void watchdog_fire(int sig)
{
	ssize_t ignored = write(STDERR_FILENO, watchdog_text, watchdog_len);

	(void)sig;
	(void)ignored;
	_exit(255);
}

void watchdog_arm(int timeout_ms, const char *what)
{
	struct itimerval it = { 0 };

	if (timeout_ms > 0) {
		/* Built here, written by the handler: it may only call write(). */
		snprintf(watchdog_text, sizeof(watchdog_text),
			 "%s: timed out after %d ms: %s (peer dead or stalled?)\n", tool_name,
			 timeout_ms, what);
		watchdog_len = strlen(watchdog_text);
		signal(SIGALRM, watchdog_fire);
		it.it_value.tv_sec = timeout_ms / 1000;
		it.it_value.tv_usec = (timeout_ms % 1000) * 1000;
	}
	fflush(stdout);
	setitimer(ITIMER_REAL, &it, NULL);
}

/* --- options and addresses ----------------------------------------------- */

int parse_int(const char *s, const char *what, long min, long max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end != '\0' || v < min || v > max) {
		errmsg("invalid %s '%s' (expected %ld to %ld)", what, s, min, max);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int parse_tos(const char *s, uint8_t *tos, bool *set)
{
	int v;

	if (parse_int(s, "type of service (-t)", 0, 255, &v))
		return -1;
	*tos = (uint8_t)v;
	*set = true;
	return 0;
}

int parse_ud_port_space(const char *s, int *ps)
{
	int v;

	if (parse_int(s, "port space (-p)", 0, 0xffff, &v))
		return -1;
	if (v != RDMA_PS_UDP && v != RDMA_PS_IPOIB) {
		errmsg("port space (-p) %#x is neither UDP (%#x) nor IPoIB (%#x)", v, RDMA_PS_UDP,
		       RDMA_PS_IPOIB);
		return -1;
	}
	*ps = v;
	return 0;
}

int no_arguments_left(int argc, char **argv)
{
	if (optind < argc) {
		errmsg("unexpected argument '%s'", argv[optind]);
		return -1;
	}
	return 0;
}

void set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

int parse_addr(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int ret;

	ret = getaddrinfo(host, NULL, &hints, &res);
	if (ret) {
		errmsg("invalid address '%s': %s", host, gai_strerror(ret));
		return ret;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	set_port((struct sockaddr *)ss, port);
	return 0;
}

const char *addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (!sa) {
		snprintf(buf, len, "(none)");
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "(address family %d)", sa->sa_family);
	}
	return buf;
}

int get_rdma_addr(const char *src, const char *dst, const char *port,
		  const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo h = *hints, *src_res = NULL;
	int ret;

	if (h.ai_flags & RAI_PASSIVE) {
		ret = rdma_getaddrinfo(src, port, &h, res);
		if (ret)
			errmsg("rdma_getaddrinfo(%s, port %s) failed: %s", src ? src : "any",
			       port, ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
		return ret;
	}
	if (src) {
		h.ai_flags |= RAI_PASSIVE;
		ret = rdma_getaddrinfo(src, NULL, &h, &src_res);
		if (ret) {
			errmsg("rdma_getaddrinfo(%s) for the source address failed: %s", src,
			       ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
			return ret;
		}
		h.ai_src_addr = src_res->ai_src_addr;
		h.ai_src_len = src_res->ai_src_len;
		h.ai_flags &= ~RAI_PASSIVE;
	}
	ret = rdma_getaddrinfo(dst, port, &h, res);
	if (ret)
		errmsg("rdma_getaddrinfo(%s, port %s) failed: %s", dst ? dst : "(none)", port,
		       ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
	if (src_res)
		rdma_freeaddrinfo(src_res);
	return ret;
}

void apply_addr_format(const char *arg, struct rdma_addrinfo *hints)
{
	if (!strncasecmp("ip", arg, 2)) {
		hints->ai_flags = RAI_NUMERICHOST;
	} else if (!strncasecmp("gid", arg, 3)) {
		hints->ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
		hints->ai_family = AF_IB;
	} else if (strncasecmp("name", arg, 4)) {
		fprintf(stderr, "Warning: unknown address format\n");
	}
}

struct rdma_event_channel *open_event_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	if (!ch) {
		if (errno == ENODEV)
			errmsg("no RDMA devices were detected (rdma_create_event_channel: %s)",
			       strerror(errno));
		else
			errno_msg("rdma_create_event_channel");
	}
	return ch;
}

/* --- CM events ------------------------------------------------------------ */

static int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t deadline = deadline_in(timeout_ms);
	int ret;

	for (;;) {
		ret = poll(&p, 1, ms_left(deadline));
		if (ret > 0)
			return 0;
		if (ret == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (errno != EINTR)
			return -1;
	}
}

int get_cm_event(struct rdma_event_channel *ch, int timeout_ms, struct rdma_cm_event **ev)
{
	if (wait_readable(ch->fd, timeout_ms))
		return -1;
	return rdma_get_cm_event(ch, ev);
}

int expect_cm_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
		    int timeout_ms, const char *what, struct rdma_cm_event **ev, int *status)
{
	struct rdma_cm_event *e;

	if (get_cm_event(ch, timeout_ms, &e)) {
		if (errno == ETIMEDOUT)
			errmsg("%s: no %s within %d ms", what, rdma_event_str(want), timeout_ms);
		else
			errno_msg("rdma_get_cm_event");
		return -1;
	}
	if (e->event == want && e->status == 0) {
		*ev = e;
		return 0;
	}
	if (e->event == want)
		event_msg(what, e);
	else
		errmsg("%s: %s (status %d: %s) instead of %s", what, rdma_event_str(e->event),
		       e->status, event_status_str(e), rdma_event_str(want));
	if (status)
		*status = e->status;
	errno = e->status < 0 ? -e->status : ECONNREFUSED;
	rdma_ack_cm_event(e);
	return -1;
}

/* --- completions ---------------------------------------------------------- */

int poll_cq_until(struct ibv_cq *cq, struct ibv_comp_channel *cc, struct ibv_wc *wc,
		  int max, int64_t deadline)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n, err;

	for (;;) {
		n = ibv_poll_cq(cq, max, wc);
		if (n)
			break;
		/* Arm, then poll again: a completion that came in between would
		 * otherwise raise no event. */
		err = ibv_req_notify_cq(cq, 0);
		if (err) {
			errno = err;
			return -1;
		}
		n = ibv_poll_cq(cq, max, wc);
		if (n)
			break;
		if (wait_readable(cc->fd, ms_left(deadline)))
			return -1;
		if (ibv_get_cq_event(cc, &ev_cq, &ev_ctx))
			return -1;
		ibv_ack_cq_events(ev_cq, 1);
	}
	if (n < 0) {
		errno = EIO;
		return -1;
	}
	return n;
}

void wc_msg(const char *what, const struct ibv_wc *wc)
{
	errmsg("%s: completion failed: %s (status %d, vendor error 0x%x)", what,
	       ibv_wc_status_str(wc->status), wc->status, wc->vendor_err);
}

int create_cq(struct ibv_context *verbs, int cqe, void *ctx, struct ibv_comp_channel **cc,
	      struct ibv_cq **cq)
{
	if (!(*cc = ibv_create_comp_channel(verbs))) {
		errno_msg("ibv_create_comp_channel");
		return -1;
	}
	if (!(*cq = ibv_create_cq(verbs, cqe, ctx, *cc, 0))) {
		errno_msg("ibv_create_cq");
		return -1;
	}
	return 0;
}

void destroy_cq(struct ibv_cq *cq, struct ibv_comp_channel *cc)
{
	if (cq)
		ibv_destroy_cq(cq);
	if (cc)
		ibv_destroy_comp_channel(cc);
}

int set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		return -1;
	return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* --- data ------------------------------------------------------------------- */

static uint8_t pattern_byte(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)x;
}

void fill_pattern(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

long check_pattern(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return (long)i;
	return -1;
}
