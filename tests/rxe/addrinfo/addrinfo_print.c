/* Canonical text form of rdma_getaddrinfo results (see addrinfo_print.h). */
#include "addrinfo_print.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <string.h>
#include <infiniband/ib.h>

static const char *family_name(int f)
{
	switch (f) {
	case AF_UNSPEC: return "AF_UNSPEC";
	case AF_INET: return "AF_INET";
	case AF_INET6: return "AF_INET6";
	case AF_IB: return "AF_IB";
	}
	return "?";
}

static const char *qp_name(int t)
{
	switch (t) {
	case 0: return "0";
	case IBV_QPT_RC: return "IBV_QPT_RC";
	case IBV_QPT_UC: return "IBV_QPT_UC";
	case IBV_QPT_UD: return "IBV_QPT_UD";
	case IBV_QPT_XRC_SEND: return "IBV_QPT_XRC_SEND";
	case IBV_QPT_XRC_RECV: return "IBV_QPT_XRC_RECV";
	}
	return "?";
}

static const char *ps_name(int ps)
{
	switch (ps) {
	case 0: return "0";
	case RDMA_PS_IPOIB: return "RDMA_PS_IPOIB";
	case RDMA_PS_TCP: return "RDMA_PS_TCP";
	case RDMA_PS_UDP: return "RDMA_PS_UDP";
	case RDMA_PS_IB: return "RDMA_PS_IB";
	}
	return "?";
}

static void print_hex(FILE *out, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		fprintf(out, "%s%02x", i && i % 32 == 0 ? "\n      " : "", b[i]);
}

static void print_addr(FILE *out, const char *which, const struct sockaddr *sa,
		       socklen_t len)
{
	char buf[INET6_ADDRSTRLEN];

	fprintf(out, "    %s_len %u %s_addr ", which, (unsigned)len, which);
	if (!sa) {
		fprintf(out, "NULL\n");
		return;
	}
	fprintf(out, "%s(%d)", family_name(sa->sa_family), sa->sa_family);
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
		fprintf(out, " %s port %u", buf, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
		fprintf(out, " %s port %u flowinfo %u scope_id %u", buf,
			ntohs(in6->sin6_port), ntohl(in6->sin6_flowinfo), in6->sin6_scope_id);
	} else if (sa->sa_family == AF_IB && len >= sizeof(struct sockaddr_ib)) {
		const struct sockaddr_ib *ib = (const void *)sa;

		inet_ntop(AF_INET6, &ib->sib_addr, buf, sizeof(buf));
		fprintf(out, " gid %s pkey 0x%04x flowinfo %u sid 0x%016" PRIx64
			" sid_mask 0x%016" PRIx64 " scope_id %" PRIu64, buf,
			be16toh(ib->sib_pkey), be32toh(ib->sib_flowinfo),
			(uint64_t)be64toh(ib->sib_sid), (uint64_t)be64toh(ib->sib_sid_mask),
			(uint64_t)ib->sib_scope_id);
	}
	/* The raw bytes too: padding, sin_zero and anything not decoded above. */
	fprintf(out, "\n      bytes ");
	print_hex(out, sa, len);
	fprintf(out, "\n");
}

static void print_blob(FILE *out, const char *which, const void *p, size_t len)
{
	fprintf(out, "    %s_len %zu %s ", which, len, which);
	if (!p) {
		fprintf(out, "NULL\n");
		return;
	}
	fprintf(out, "bytes\n      ");
	print_hex(out, p, len);
	fprintf(out, "\n");
}

static void print_name(FILE *out, const char *which, const char *name)
{
	if (name)
		fprintf(out, "    %s \"%s\"\n", which, name);
	else
		fprintf(out, "    %s NULL\n", which);
}

void print_outcome(FILE *out, int ret, int err)
{
	if (ret == 0) {
		fprintf(out, "  ret 0\n");
	} else if (ret == -1) {
		fprintf(out, "  ret -1 errno %d (%s)\n", err, strerror(err));
	} else if (ret == EAI_SYSTEM) {
		/* Only for EAI_SYSTEM does the resolver promise anything about errno. */
		fprintf(out, "  ret %d (%s) errno %d (%s)\n", ret, gai_strerror(ret), err,
			strerror(err));
	} else {
		/* A resolver failure: the EAI code itself, as rdma-core 44 returns it.
		 * errno is whatever the resolver left behind (not part of the API, and
		 * it differs with the path taken inside the resolver): not printed. */
		fprintf(out, "  ret %d (%s)\n", ret, gai_strerror(ret));
	}
}

void print_list(FILE *out, const struct rdma_addrinfo *rai)
{
	int n = 0;

	for (; rai; rai = rai->ai_next, n++) {
		fprintf(out, "  entry %d\n", n);
		fprintf(out, "    ai_flags 0x%x ai_family %s(%d) ai_qp_type %s(%d) "
			"ai_port_space %s(0x%x)\n", rai->ai_flags,
			family_name(rai->ai_family), rai->ai_family,
			qp_name(rai->ai_qp_type), rai->ai_qp_type,
			ps_name(rai->ai_port_space), rai->ai_port_space);
		print_addr(out, "src", rai->ai_src_addr, rai->ai_src_len);
		print_addr(out, "dst", rai->ai_dst_addr, rai->ai_dst_len);
		print_name(out, "ai_src_canonname", rai->ai_src_canonname);
		print_name(out, "ai_dst_canonname", rai->ai_dst_canonname);
		/* Route data only comes from ibacm (rdma-core's ucma_ib_resolve);
		 * printed byte for byte if either library ever returns some. */
		print_blob(out, "ai_route", rai->ai_route, rai->ai_route_len);
		print_blob(out, "ai_connect", rai->ai_connect, rai->ai_connect_len);
	}
	fprintf(out, "  entries %d\n", n);
}
