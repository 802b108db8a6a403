/* Canonical text form of rdma_getaddrinfo's outcome: every field of every
 * entry, so that two libraries' answers can be compared with diff. */
#ifndef ADDRINFO_PRINT_H
#define ADDRINFO_PRINT_H

#include <stdio.h>
#include <rdma/rdma_cma.h>

/* The call's return value (and errno where it is deterministic). */
void print_outcome(FILE *out, int ret, int err);

/* Every entry of the ai_next chain, field by field. */
void print_list(FILE *out, const struct rdma_addrinfo *rai);

#endif
