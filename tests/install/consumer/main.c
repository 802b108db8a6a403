#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <infiniband/ib.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	const char *s = rdma_event_str(RDMA_CM_EVENT_ESTABLISHED);

	puts(s);
	return strcmp(s, "RDMA_CM_EVENT_ESTABLISHED") != 0;
}
