/* Hints for the addrinfo table, written compactly and built into a struct
 * rdma_addrinfo; the $IP/$IP6/$HOST/$LL6 tokens of the table expanded. */
#ifndef ADDRINFO_HINTS_H
#define ADDRINFO_HINTS_H

#include <stdio.h>
#include <rdma/rdma_cma.h>

struct hint {
	int flags, family, qp_type, port_space;
	/* Numeric address, "#port" optional; "ib:" before an IPv6 address
	 * makes it a sockaddr_ib with that GID. */
	const char *src, *dst;
	int route; /* nonzero: ai_route holds a made-up ibv_path_record */
};

/* s with its tokens replaced (a new string), or NULL for NULL. */
const char *expand(const char *s);

void make_hints(struct rdma_addrinfo *out, const struct hint *h);

/* " hints NULL" or " hints {the fields set}", tokens unexpanded. */
void print_hint_label(FILE *out, const struct hint *h);

#endif
