/* Building the table's hints (see addrinfo_hints.h). */
#define _GNU_SOURCE
#include "addrinfo_hints.h"

#include <arpa/inet.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/ib.h>
#include <infiniband/sa.h>

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

static const char *token_value(const char *tok, size_t *len)
{
	static char host[256], ll6[64];

	/* Longest first: $IP6 before $IP. */
	if (!strncmp(tok, "$IP6", 4))
		return *len = 4, env_or("RXE_IP6", "::1");
	if (!strncmp(tok, "$IP", 3))
		return *len = 3, env_or("RXE_IP", "127.0.0.1");
	if (!strncmp(tok, "$HOST", 5)) {
		if (gethostname(host, sizeof(host) - 1))
			strcpy(host, "gethostname-failed");
		return *len = 5, host;
	}
	if (!strncmp(tok, "$LL6", 4)) {
		snprintf(ll6, sizeof(ll6), "fe80::1%%%s", env_or("RXE_NETDEV", "lo"));
		return *len = 4, ll6;
	}
	return *len = 1, "$";
}

const char *expand(const char *s)
{
	char buf[512] = "";
	size_t used = 0, len;

	if (!s)
		return NULL;
	while (*s && used < sizeof(buf) - 1) {
		if (*s == '$') {
			used += snprintf(buf + used, sizeof(buf) - used, "%s", token_value(s, &len));
			s += len;
		} else {
			buf[used++] = *s++;
		}
	}
	buf[used < sizeof(buf) ? used : sizeof(buf) - 1] = '\0';
	return strdup(buf); /* the children exit right after: never freed */
}

/* A sockaddr for "addr[#port]" or "ib:gid" (calloc'ed), with its length. */
static struct sockaddr *make_addr(const char *spec, socklen_t *len)
{
	char *text = (char *)expand(spec), *port = strchr(text, '#');
	int ib = !strncmp(text, "ib:", 3);
	const char *addr = ib ? text + 3 : text;
	uint16_t p = port ? (uint16_t)atoi(port + 1) : 0;

	if (port)
		*port = '\0';
	if (ib) {
		struct sockaddr_ib *sib = calloc(1, sizeof(*sib));

		sib->sib_family = AF_IB;
		sib->sib_pkey = htobe16(0xffff);
		inet_pton(AF_INET6, addr, &sib->sib_addr);
		*len = sizeof(*sib);
		return (struct sockaddr *)sib;
	}
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *in6 = calloc(1, sizeof(*in6));

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(p);
		inet_pton(AF_INET6, addr, &in6->sin6_addr);
		*len = sizeof(*in6);
		return (struct sockaddr *)in6;
	}
	struct sockaddr_in *in = calloc(1, sizeof(*in));

	in->sin_family = AF_INET;
	in->sin_port = htons(p);
	inet_pton(AF_INET, addr, &in->sin_addr);
	*len = sizeof(*in);
	return (struct sockaddr *)in;
}

void make_hints(struct rdma_addrinfo *out, const struct hint *h)
{
	static struct ibv_path_record path;

	memset(out, 0, sizeof(*out));
	out->ai_flags = h->flags;
	out->ai_family = h->family;
	out->ai_qp_type = h->qp_type;
	out->ai_port_space = h->port_space;
	if (h->src)
		out->ai_src_addr = make_addr(h->src, &out->ai_src_len);
	if (h->dst)
		out->ai_dst_addr = make_addr(h->dst, &out->ai_dst_len);
	if (h->route) {
		memset(&path, 0x5a, sizeof(path));
		out->ai_route = &path;
		out->ai_route_len = sizeof(path);
	}
}

void print_hint_label(FILE *out, const struct hint *h)
{
	if (!h) {
		fprintf(out, " hints NULL");
		return;
	}
	fprintf(out, " hints {flags 0x%x family %d qp_type %d port_space 0x%x", h->flags,
		h->family, h->qp_type, h->port_space);
	if (h->src)
		fprintf(out, " src %s", h->src);
	if (h->dst)
		fprintf(out, " dst %s", h->dst);
	if (h->route)
		fprintf(out, " route path_record");
	fprintf(out, "}");
}
