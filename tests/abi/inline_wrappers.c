/*
 * Built twice (see CMakeLists.txt): with INLINE_API_OURS against include/,
 * without it against the system's rdma-core headers.
 */
#include <rdma/rdma_verbs.h>
#include <rdma/rdma_cma.h>
#include <infiniband/ib.h>

#include "inline_wrappers.h"

/* RAI_SA exists only in our headers: proves which set this TU really got. */
#if defined(INLINE_API_OURS) && !defined(RAI_SA)
#error "the 'ours' wrappers were compiled against rdma-core's headers"
#endif
#if !defined(INLINE_API_OURS) && defined(RAI_SA)
#error "the 'ref' wrappers were compiled against the project's headers"
#endif

static struct sockaddr *w_get_local_addr(struct rdma_cm_id *id)
{ return rdma_get_local_addr(id); }
static struct sockaddr *w_get_peer_addr(struct rdma_cm_id *id)
{ return rdma_get_peer_addr(id); }
static int w_seterrno(int ret)
{ return rdma_seterrno(ret); }
static struct ibv_mr *w_reg_msgs(struct rdma_cm_id *id, void *addr, size_t len)
{ return rdma_reg_msgs(id, addr, len); }
static struct ibv_mr *w_reg_read(struct rdma_cm_id *id, void *addr, size_t len)
{ return rdma_reg_read(id, addr, len); }
static struct ibv_mr *w_reg_write(struct rdma_cm_id *id, void *addr, size_t len)
{ return rdma_reg_write(id, addr, len); }
static int w_dereg_mr(struct ibv_mr *mr)
{ return rdma_dereg_mr(mr); }
static int w_post_recvv(struct rdma_cm_id *id, void *context,
			struct ibv_sge *sgl, int nsge)
{ return rdma_post_recvv(id, context, sgl, nsge); }
static int w_post_sendv(struct rdma_cm_id *id, void *context,
			struct ibv_sge *sgl, int nsge, int flags)
{ return rdma_post_sendv(id, context, sgl, nsge, flags); }
static int w_post_readv(struct rdma_cm_id *id, void *context,
			struct ibv_sge *sgl, int nsge, int flags,
			uint64_t remote_addr, uint32_t rkey)
{ return rdma_post_readv(id, context, sgl, nsge, flags, remote_addr, rkey); }
static int w_post_writev(struct rdma_cm_id *id, void *context,
			 struct ibv_sge *sgl, int nsge, int flags,
			 uint64_t remote_addr, uint32_t rkey)
{ return rdma_post_writev(id, context, sgl, nsge, flags, remote_addr, rkey); }
static int w_post_recv(struct rdma_cm_id *id, void *context, void *addr,
		       size_t length, struct ibv_mr *mr)
{ return rdma_post_recv(id, context, addr, length, mr); }
static int w_post_send(struct rdma_cm_id *id, void *context, void *addr,
		       size_t length, struct ibv_mr *mr, int flags)
{ return rdma_post_send(id, context, addr, length, mr, flags); }
static int w_post_read(struct rdma_cm_id *id, void *context, void *addr,
		       size_t length, struct ibv_mr *mr, int flags,
		       uint64_t remote_addr, uint32_t rkey)
{ return rdma_post_read(id, context, addr, length, mr, flags, remote_addr, rkey); }
static int w_post_write(struct rdma_cm_id *id, void *context, void *addr,
			size_t length, struct ibv_mr *mr, int flags,
			uint64_t remote_addr, uint32_t rkey)
{ return rdma_post_write(id, context, addr, length, mr, flags, remote_addr, rkey); }
static int w_post_ud_send(struct rdma_cm_id *id, void *context, void *addr,
			  size_t length, struct ibv_mr *mr, int flags,
			  struct ibv_ah *ah, uint32_t remote_qpn)
{ return rdma_post_ud_send(id, context, addr, length, mr, flags, ah, remote_qpn); }
static int w_get_send_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{ return rdma_get_send_comp(id, wc); }
static int w_get_recv_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{ return rdma_get_recv_comp(id, wc); }
static int w_ib_addr_any(const struct ib_addr *a)
{ return ib_addr_any(a); }
static int w_ib_addr_loopback(const struct ib_addr *a)
{ return ib_addr_loopback(a); }
static void w_ib_addr_set(struct ib_addr *addr, uint32_t w1, uint32_t w2,
			  uint32_t w3, uint32_t w4)
{ ib_addr_set(addr, w1, w2, w3, w4); }
static int w_ib_addr_cmp(const struct ib_addr *a1, const struct ib_addr *a2)
{ return ib_addr_cmp(a1, a2); }

const struct inline_api INLINE_API_NAME = {
#ifdef INLINE_API_OURS
	"ours",
#else
	"rdma-core",
#endif
	w_get_local_addr, w_get_peer_addr,
	w_seterrno, w_reg_msgs, w_reg_read, w_reg_write, w_dereg_mr,
	w_post_recvv, w_post_sendv, w_post_readv, w_post_writev,
	w_post_recv, w_post_send, w_post_read, w_post_write, w_post_ud_send,
	w_get_send_comp, w_get_recv_comp,
	w_ib_addr_any, w_ib_addr_loopback, w_ib_addr_set, w_ib_addr_cmp,
};
