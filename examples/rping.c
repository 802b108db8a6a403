/*
 * rping: ping-pong over one RDMA RC connection, wire-compatible with
 * rdma-core's rping.
 *
 * Each ping, the client advertises its source buffer (address, rkey, size in
 * 16 big-endian bytes, sent with SEND); the server RDMA-READs it and answers
 * "go ahead"; the client advertises its sink buffer; the server RDMA-WRITEs
 * the data back there and answers "go ahead" again. -V has the client
 * compare what came back with what it sent, and the server check the ping
 * text it read. Every wait for the peer is bounded (peer_timeout_ms()),
 * except a server's wait for a client.
 *
 * Exit status: 0 on success, 22 (EINVAL) for bad options, errno (19,
 * ENODEV: no device) when the event channel cannot be opened, 256 + the
 * EAI_* code for an address getaddrinfo cannot resolve, 255 on failure.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "common.h"
#include "rping.h"

#define DEFAULT_PORT 7174
#define DEFAULT_SIZE 64
#define MIN_SIZE 23 /* what rdma-core's rping accepts */
#define MAX_SIZE 65535
#define PING_FMT "rdma-ping-%d: "

/* --- the ping data -------------------------------------------------------- */

/* "rdma-ping-N: " then letters A..z rotating, starting one further each ping. */
static void format_ping(char *buf, int size, int ping)
{
	int n = snprintf(buf, size, PING_FMT, ping);

	for (int i = n; i < size; i++)
		buf[i] = (char)('A' + (ping % 58 + (i - n)) % 58);
	buf[size - 1] = '\0';
}

static int check_ping(const char *buf, int size, int ping)
{
	char *want = malloc(size);
	int bad = -1;

	if (!want)
		return 0;
	format_ping(want, size, ping);
	for (int i = 0; i < size && bad < 0; i++)
		if (buf[i] != want[i])
			bad = i;
	if (bad >= 0)
		errmsg("data mismatch in ping %d at byte %d of %d: got 0x%02x, expected 0x%02x",
		       ping, bad, size, (unsigned char)buf[bad], (unsigned char)want[bad]);
	free(want);
	return bad >= 0 ? -1 : 0;
}

/* --- client --------------------------------------------------------------- */

static int set_tos(struct rdma_cm_id *id, uint8_t tos)
{
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos))) {
		errno_msg("rdma_set_option(RDMA_OPTION_ID_TOS)");
		return -1;
	}
	return 0;
}

static int client_pings(struct conn *c)
{
	const struct options *o = c->o;
	int t = peer_timeout_ms(), r;

	for (int ping = 0; !o->count || ping < o->count; ping++) {
		format_ping(c->start, o->size, ping);
		if (o->validate)
			memset(c->buf, 0, o->size);
		if (conn_post_desc(c, c->start, c->start_mr))
			return -1;
		r = conn_wait(c, RECV, t, "waiting for the server to read the ping");
		if (r == 0) {
			c->recvs--;
			if (conn_post_desc(c, c->buf, c->buf_mr))
				return -1;
			r = conn_wait(c, RECV, t, "waiting for the server to write the pong");
		}
		if (r == 1 && !o->count)
			return 0; /* endless pings: the server ends them */
		if (r == 1) {
			errmsg("the server disconnected after %d of %d pings", ping, o->count);
			return -1;
		}
		if (r)
			return -1;
		c->recvs--;
		if (o->validate && memcmp(c->start, c->buf, o->size)) {
			int i = 0;

			while (c->start[i] == c->buf[i])
				i++;
			errmsg("data mismatch in ping %d at byte %d of %d: sent 0x%02x, got back 0x%02x",
			       ping, i, o->size, (unsigned char)c->start[i], (unsigned char)c->buf[i]);
			return -1;
		}
		if (o->verbose)
			printf("ping data: %s\n", c->buf);
	}
	return 0;
}

static int client_connect(struct conn *c, const struct options *o)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_event *ev;
	char a[64];
	int t = peer_timeout_ms();

	addr_str((struct sockaddr *)&o->addr, a, sizeof(a));
	if (rdma_resolve_addr(c->id, o->have_src ? (struct sockaddr *)&o->src : NULL,
			      (struct sockaddr *)&o->addr, 2000)) {
		errmsg("rdma_resolve_addr(%s) failed: %s", a, strerror(errno));
		return -1;
	}
	if (expect_cm_event(c->ch, RDMA_CM_EVENT_ADDR_RESOLVED, t, "resolving the address", &ev, NULL))
		return -1;
	rdma_ack_cm_event(ev);
	if (o->set_tos && set_tos(c->id, o->tos))
		return -1;
	if (rdma_resolve_route(c->id, 2000)) {
		errno_msg("rdma_resolve_route");
		return -1;
	}
	if (expect_cm_event(c->ch, RDMA_CM_EVENT_ROUTE_RESOLVED, t, "resolving the route", &ev, NULL))
		return -1;
	rdma_ack_cm_event(ev);
	if (conn_setup(c))
		return -1;
	if (o->self_qp)
		param.qp_num = c->qp->qp_num;
	if (rdma_connect(c->id, &param)) {
		errno_msg("rdma_connect");
		return -1;
	}
	char what[96];

	snprintf(what, sizeof(what), "connecting to %s", a);
	if (!o->self_qp) {
		if (expect_cm_event(c->ch, RDMA_CM_EVENT_ESTABLISHED, t, what, &ev, NULL))
			return -1;
		rdma_ack_cm_event(ev);
		return 0;
	}
	/* With our own QP, rdma_cm hands us the reply to finish the handshake. */
	if (expect_cm_event(c->ch, RDMA_CM_EVENT_CONNECT_RESPONSE, t, what, &ev, NULL))
		return -1;
	rdma_ack_cm_event(ev);
	if (conn_self_modify_qp(c))
		return -1;
	if (rdma_establish(c->id)) {
		errno_msg("rdma_establish");
		return -1;
	}
	return 0;
}

static int run_client(const struct options *o, struct rdma_event_channel *ch)
{
	struct conn c = { .o = o, .ch = ch };
	int ret;

	if (rdma_create_id(ch, &c.id, &c, RDMA_PS_TCP)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	ret = client_connect(&c, o);
	if (ret == 0) {
		ret = client_pings(&c);
		if (!c.disconnected) {
			conn_disconnect(&c);
			/* Bounded: a dead server's DREQ times out and still
			 * produces the event. */
			if (conn_wait(&c, DISCONNECT, peer_timeout_ms(), "disconnecting") < 0)
				ret = -1;
		}
	}
	conn_teardown(&c);
	rdma_destroy_id(c.id);
	return ret;
}

/* --- server --------------------------------------------------------------- */

/* Serves one connected client until it disconnects. */
static int server_pings(struct conn *c)
{
	const struct options *o = c->o;
	int t = peer_timeout_ms(), r;

	for (int ping = 0;; ping++) {
		r = conn_wait(c, RECV, t, "waiting for the client's ping");
		if (r == 1)
			return 0; /* the client is done */
		if (r)
			return -1;
		c->recvs--;
		if (c->peer.size > (uint32_t)o->size) {
			errmsg("the client's pings are %u bytes, more than this server's -S %d",
			       c->peer.size, o->size);
			return -1;
		}
		c->read_done = false;
		if (conn_post_rdma(c, IBV_WR_RDMA_READ, c->peer.size))
			return -1;
		if ((r = conn_wait(c, READ_DONE, t, "reading the ping")) != 0)
			break;
		c->buf[o->size - 1] = '\0';
		if (o->validate && check_ping(c->buf, c->peer.size, ping))
			return -1;
		if (o->verbose)
			printf("server ping data: %s\n", c->buf);
		if (conn_post_desc(c, NULL, NULL))
			return -1;
		if ((r = conn_wait(c, RECV, t, "waiting for the client's sink buffer")) != 0)
			break;
		c->recvs--;
		c->write_done = false;
		uint32_t len = (uint32_t)strnlen(c->buf, o->size - 1) + 1;

		if (len > c->peer.size)
			len = c->peer.size;
		if (conn_post_rdma(c, IBV_WR_RDMA_WRITE, len))
			return -1;
		if ((r = conn_wait(c, WRITE_DONE, t, "writing the pong")) != 0)
			break;
		if (conn_post_desc(c, NULL, NULL))
			return -1;
	}
	if (r == 1)
		errmsg("the client disconnected in the middle of a ping");
	return -1;
}

/* Accepts the connection request of c->id (a new id) and serves it. */
static int serve(struct conn *c)
{
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	int ret = -1;

	if (conn_setup(c) || (c->o->self_qp && conn_self_modify_qp(c))) {
		rdma_reject(c->id, NULL, 0);
		goto out;
	}
	if (c->o->self_qp)
		param.qp_num = c->qp->qp_num;
	if (rdma_accept(c->id, &param)) {
		errno_msg("rdma_accept");
		goto out;
	}
	ret = server_pings(c);
	if (!c->disconnected)
		conn_disconnect(c);
out:
	conn_teardown(c);
	rdma_destroy_id(c->id);
	return ret;
}

static int listen_on(const struct options *o, struct rdma_event_channel *ch,
		     struct rdma_cm_id **listen_id)
{
	char a[64];

	if (rdma_create_id(ch, listen_id, NULL, RDMA_PS_TCP)) {
		errno_msg("rdma_create_id");
		return -1;
	}
	addr_str((struct sockaddr *)&o->addr, a, sizeof(a));
	if (rdma_bind_addr(*listen_id, (struct sockaddr *)&o->addr)) {
		errmsg("rdma_bind_addr(%s) failed: %s", a, strerror(errno));
		return -1;
	}
	if (o->set_tos && set_tos(*listen_id, o->tos))
		return -1;
	if (rdma_listen(*listen_id, 3)) {
		errmsg("rdma_listen(%s) failed: %s", a, strerror(errno));
		return -1;
	}
	debug_msg("listening on %s", a);
	return 0;
}

/* Waits (without limit) for the next connection request on the listener. */
static struct rdma_cm_id *next_request(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	for (;;) {
		if (get_cm_event(ch, WAIT_FOREVER, &ev)) {
			errno_msg("rdma_get_cm_event");
			return NULL;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *id = ev->id;

			rdma_ack_cm_event(ev);
			return id;
		}
		event_msg("waiting for a client", ev);
		bool fatal = ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL;

		rdma_ack_cm_event(ev);
		if (fatal)
			return NULL;
	}
}

struct worker {
	struct conn c;
	struct options o;
};

static void *persistent_worker(void *arg)
{
	struct worker *w = arg;
	struct rdma_event_channel *ch = w->c.ch;

	if (serve(&w->c))
		errmsg("a client's connection failed; still serving others");
	rdma_destroy_event_channel(ch);
	free(w);
	return NULL;
}

/* -P: each client is served by its own thread, on its own event channel. */
static int serve_forever(const struct options *o, struct rdma_event_channel *ch)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		struct rdma_cm_id *id = next_request(ch);
		struct worker *w;
		pthread_t t;
		int err;

		if (!id)
			return -1;
		w = calloc(1, sizeof(*w));
		if (!w || !(w->c.ch = rdma_create_event_channel())) {
			errmsg("no memory or event channel for a new client: rejecting it");
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			free(w);
			continue;
		}
		w->o = *o;
		w->c.o = &w->o;
		w->c.server = true;
		w->c.id = id;
		id->context = &w->c;
		if (rdma_migrate_id(id, w->c.ch)) {
			errno_msg("rdma_migrate_id");
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			rdma_destroy_event_channel(w->c.ch);
			free(w);
			continue;
		}
		err = pthread_create(&t, &attr, persistent_worker, w);
		if (err) {
			errmsg("pthread_create failed: %s", strerror(err));
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			rdma_destroy_event_channel(w->c.ch);
			free(w);
		}
	}
}

static int run_server(const struct options *o, struct rdma_event_channel *ch)
{
	struct rdma_cm_id *listen_id = NULL;
	int ret = -1;

	if (listen_on(o, ch, &listen_id))
		goto out;
	if (o->persistent) {
		ret = serve_forever(o, ch);
	} else {
		struct conn c = { .o = o, .ch = ch, .server = true };

		c.id = next_request(ch);
		if (c.id) {
			c.id->context = &c;
			ret = serve(&c);
		}
	}
out:
	if (listen_id)
		rdma_destroy_id(listen_id);
	return ret;
}

/* --- main ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		"usage: rping -s [-vVd] [-P] [-S size] [-C count] [-a addr] [-p port] [-t tos] [-q]\n"
		"       rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port] [-t tos] [-q]\n"
		"  -s        server\n"
		"  -c        client\n"
		"  -a addr   server: address to listen on (default any; -a ::0 for any IPv6);\n"
		"            client: the server's address\n"
		"  -I addr   client: source address to bind to\n"
		"  -p port   port (default %d)\n"
		"  -C count  pings (default 0: until stopped)\n"
		"  -S size   ping data size, %d to %d bytes (default %d)\n"
		"  -v        print the ping data\n"
		"  -V        verify the ping data\n"
		"  -d        debug messages\n"
		"  -P        persistent server: serve clients until killed\n"
		"  -q        create and modify the QP here instead of in rdma_cm\n"
		"  -t tos    type of service\n"
		"environment: RDMACM_TOOLS_TIMEOUT=seconds to wait for a silent peer (default 20)\n",
		DEFAULT_PORT, MIN_SIZE, MAX_SIZE, DEFAULT_SIZE);
}

enum { USAGE = 1, BAD_VALUE = 2 };

/* 0, USAGE, BAD_VALUE, or getaddrinfo's (negative) code for an address. */
static int parse_options(int argc, char **argv, struct options *o)
{
	const char *addr = NULL, *src = NULL;
	int port = DEFAULT_PORT, side = -1, op;

	*o = (struct options){ .size = DEFAULT_SIZE };
	while ((op = getopt(argc, argv, "a:I:Pp:C:S:t:scvVdq")) != -1) {
		switch (op) {
		case 'a': addr = optarg; break;
		case 'I': src = optarg; break;
		case 'P': o->persistent = true; break;
		case 'p':
			if (parse_int(optarg, "port (-p)", 0, 65535, &port))
				return BAD_VALUE;
			break;
		case 'C':
			if (parse_int(optarg, "count (-C)", 0, 0x7fffffff, &o->count))
				return BAD_VALUE;
			break;
		case 'S':
			if (parse_int(optarg, "size (-S)", MIN_SIZE, MAX_SIZE, &o->size))
				return BAD_VALUE;
			break;
		case 't':
			if (parse_tos(optarg, &o->tos, &o->set_tos))
				return BAD_VALUE;
			break;
		case 's': side = 1; break;
		case 'c': side = 0; break;
		case 'v': o->verbose = true; break;
		case 'V': o->validate = true; break;
		case 'd': tool_debug = 1; break;
		case 'q': o->self_qp = true; break;
		default: return USAGE;
		}
	}
	if (no_arguments_left(argc, argv))
		return USAGE;
	if (side < 0) {
		errmsg("say -s (server) or -c (client)");
		return USAGE;
	}
	o->server = side;
	if (!o->server && !addr) {
		errmsg("the client needs the server's address (-a)");
		return USAGE;
	}
	if (addr) {
		int err = parse_addr(addr, (uint16_t)port, &o->addr);

		if (err)
			return err;
		o->have_addr = true;
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&o->addr;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
	}
	if (src) {
		int err = parse_addr(src, 0, &o->src);

		if (err)
			return err;
		o->have_src = true;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct options o;
	int ret;

	tool_init("rping");
	ret = parse_options(argc, argv, &o);
	if (ret == USAGE)
		usage();
	if (ret == USAGE || ret == BAD_VALUE)
		return EINVAL;
	if (ret)
		return ret; /* an unusable address: getaddrinfo's code, as rdma-core */
	ch = open_event_channel();
	if (!ch)
		return errno;
	ret = o.server ? run_server(&o, ch) : run_client(&o, ch);
	rdma_destroy_event_channel(ch);
	return ret ? 255 : 0;
}
