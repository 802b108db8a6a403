/*
 * rdmacm: RDMA communication manager, public API.
 *
 * Binary and source compatible with the <rdma/rdma_cma.h> of rdma-core's
 * librdmacm: every type, constant and prototype below keeps the layout,
 * value and signature that header defines.  Items marked "RDMACM_1.4" are
 * newer upstream additions that rdma-core 44 does not have yet.
 */

#if !defined(RDMA_CMA_H)
#define RDMA_CMA_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Kinds of event reported on an rdma_event_channel.  After a DEVICE_REMOVAL
 * event the id must be destroyed and every resource taken on its device freed.
 */
enum rdma_cm_event_type {
	RDMA_CM_EVENT_ADDR_RESOLVED,
	RDMA_CM_EVENT_ADDR_ERROR,
	RDMA_CM_EVENT_ROUTE_RESOLVED,
	RDMA_CM_EVENT_ROUTE_ERROR,
	RDMA_CM_EVENT_CONNECT_REQUEST,
	RDMA_CM_EVENT_CONNECT_RESPONSE,
	RDMA_CM_EVENT_CONNECT_ERROR,
	RDMA_CM_EVENT_UNREACHABLE,
	RDMA_CM_EVENT_REJECTED,
	RDMA_CM_EVENT_ESTABLISHED,
	RDMA_CM_EVENT_DISCONNECTED,
	RDMA_CM_EVENT_DEVICE_REMOVAL,
	RDMA_CM_EVENT_MULTICAST_JOIN,
	RDMA_CM_EVENT_MULTICAST_ERROR,
	RDMA_CM_EVENT_ADDR_CHANGE,
	RDMA_CM_EVENT_TIMEWAIT_EXIT,
	/* RDMACM_1.4 */
	RDMA_CM_EVENT_ADDRINFO_RESOLVED,
	RDMA_CM_EVENT_ADDRINFO_ERROR,
	RDMA_CM_EVENT_USER,
	RDMA_CM_EVENT_INTERNAL
};

/* Port spaces an rdma_cm_id can be created in. */
enum rdma_port_space {
	RDMA_PS_IPOIB = 0x0002,
	RDMA_PS_TCP   = 0x0106,
	RDMA_PS_UDP   = 0x0111,
	RDMA_PS_IB    = 0x013F,
};

/* Split of an AF_IB service id into port space and port number. */
#define RDMA_IB_IP_PS_MASK   0xFFFFFFFFFFFF0000ULL
#define RDMA_IB_IP_PORT_MASK 0x000000000000FFFFULL
#define RDMA_IB_IP_PS_TCP    0x0000000001060000ULL
#define RDMA_IB_IP_PS_UDP    0x0000000001110000ULL
#define RDMA_IB_PS_IB        0x00000000013F0000ULL

/* Q_Key used by UD QPs and multicast groups set up through the CM. */
#define RDMA_UDP_QKEY 0x01234567

/* InfiniBand part of a resolved address. */
struct rdma_ib_addr {
	union ibv_gid	sgid;
	union ibv_gid	dgid;
	__be16		pkey;
};

/* Source and destination of an id, viewable as any sockaddr flavour. */
struct rdma_addr {
	__extension__ union {
		struct sockaddr		src_addr;
		struct sockaddr_in	src_sin;
		struct sockaddr_in6	src_sin6;
		struct sockaddr_storage	src_storage;
	};
	__extension__ union {
		struct sockaddr		dst_addr;
		struct sockaddr_in	dst_sin;
		struct sockaddr_in6	dst_sin6;
		struct sockaddr_storage	dst_storage;
	};
	union {
		struct rdma_ib_addr	ibaddr;
	} addr;
};

/* Addresses plus the path records resolved for them. */
struct rdma_route {
	struct rdma_addr	addr;
	struct ibv_sa_path_rec	*path_rec;
	int			num_paths;
};

/* Event queue; fd may be polled for readability. */
struct rdma_event_channel {
	int			fd;
};

/* A communication identifier: the RDMA analogue of a socket. */
struct rdma_cm_id {
	struct ibv_context	*verbs;
	struct rdma_event_channel *channel;
	void			*context;
	struct ibv_qp		*qp;
	struct rdma_route	route;
	enum rdma_port_space	ps;
	uint8_t			port_num;
	struct rdma_cm_event	*event;
	struct ibv_comp_channel	*send_cq_channel;
	struct ibv_cq		*send_cq;
	struct ibv_comp_channel	*recv_cq_channel;
	struct ibv_cq		*recv_cq;
	struct ibv_srq		*srq;
	struct ibv_pd		*pd;
	enum ibv_qp_type	qp_type;
};

/* Upper bounds for responder_resources / initiator_depth. */
enum {
	RDMA_MAX_RESP_RES = 0xFF,
	RDMA_MAX_INIT_DEPTH = 0xFF
};

/*
 * Connection parameters.  retry_count is not used by rdma_accept; srq and
 * qp_num are only used when the id has no QP of its own.
 */
struct rdma_conn_param {
	const void	*private_data;
	uint8_t		private_data_len;
	uint8_t		responder_resources;
	uint8_t		initiator_depth;
	uint8_t		flow_control;
	uint8_t		retry_count;
	uint8_t		rnr_retry_count;
	uint8_t		srq;
	uint32_t	qp_num;
};

/* Datagram (UD) parameters delivered with UD events. */
struct rdma_ud_param {
	const void	*private_data;
	uint8_t		private_data_len;
	struct ibv_ah_attr ah_attr;
	uint32_t	qp_num;
	uint32_t	qkey;
};

/* One event as returned by rdma_get_cm_event. */
struct rdma_cm_event {
	struct rdma_cm_id	*id;
	struct rdma_cm_id	*listen_id;
	enum rdma_cm_event_type	event;
	int			status;
	union {
		struct rdma_conn_param	conn;
		struct rdma_ud_param	ud;
		uint64_t		arg;	/* RDMACM_1.4: RDMA_CM_EVENT_USER */
	} param;
};

/* rdma_addrinfo.ai_flags */
#define RAI_PASSIVE		0x00000001
#define RAI_NUMERICHOST		0x00000002
#define RAI_NOROUTE		0x00000004
#define RAI_FAMILY		0x00000008
#define RAI_SA			0x00000010	/* RDMACM_1.4 */
#define RAI_DNS			0x00000020	/* RDMACM_1.4 */

/* Result list of rdma_getaddrinfo, modelled on struct addrinfo. */
struct rdma_addrinfo {
	int			ai_flags;
	int			ai_family;
	int			ai_qp_type;
	int			ai_port_space;
	socklen_t		ai_src_len;
	socklen_t		ai_dst_len;
	struct sockaddr		*ai_src_addr;
	struct sockaddr		*ai_dst_addr;
	char			*ai_src_canonname;
	char			*ai_dst_canonname;
	size_t			ai_route_len;
	void			*ai_route;
	size_t			ai_connect_len;
	void			*ai_connect;
	struct rdma_addrinfo	*ai_next;
};

/* Bits of rdma_cm_join_mc_attr_ex.comp_mask. */
enum rdma_cm_join_mc_attr_mask {
	RDMA_CM_JOIN_MC_ATTR_ADDRESS	= 1 << 0,
	RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS	= 1 << 1,
	RDMA_CM_JOIN_MC_ATTR_RESERVED	= 1 << 2,
};

/* Values of rdma_cm_join_mc_attr_ex.join_flags. */
enum rdma_cm_mc_join_flags {
	RDMA_MC_JOIN_FLAG_FULLMEMBER,
	RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
	RDMA_MC_JOIN_FLAG_RESERVED,
};

/* Argument of rdma_join_multicast_ex. */
struct rdma_cm_join_mc_attr_ex {
	uint32_t	comp_mask;	/* enum rdma_cm_join_mc_attr_mask bits */
	uint32_t	join_flags;	/* enum rdma_cm_mc_join_flags */
	struct sockaddr	*addr;		/* group to join */
};

/* Event channels. */
struct rdma_event_channel *rdma_create_event_channel(void);
void rdma_destroy_event_channel(struct rdma_event_channel *channel);

/* Identifiers.  A NULL channel makes the id synchronous. */
int rdma_create_id(struct rdma_event_channel *channel,
		   struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps);
/* Create an id (and, if qp_init_attr is given, a QP) from an addrinfo. */
int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
		   struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr);
void rdma_destroy_ep(struct rdma_cm_id *id);
int rdma_destroy_id(struct rdma_cm_id *id);

/* Address and route resolution. */
int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr);
int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms);
int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms);

/* QP attached to an id; pd NULL selects the device's default PD. */
int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr);
int rdma_create_qp_ex(struct rdma_cm_id *id,
		      struct ibv_qp_init_attr_ex *qp_init_attr);
void rdma_destroy_qp(struct rdma_cm_id *id);

/* Connection management. */
int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param);
int rdma_establish(struct rdma_cm_id *id);
int rdma_listen(struct rdma_cm_id *id, int backlog);
/* Synchronous wait for a connect request on a listening id. */
int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id);
int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param);
int rdma_reject(struct rdma_cm_id *id, const void *private_data,
		uint8_t private_data_len);
/* Like rdma_reject, reporting an ECE rejection reason. */
int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
		    uint8_t private_data_len);
/* Report a QP async event (e.g. IBV_EVENT_COMM_EST) to the CM. */
int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event);
int rdma_disconnect(struct rdma_cm_id *id);

/* Multicast. */
int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
			void *context);
int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr);
int rdma_join_multicast_ex(struct rdma_cm_id *id,
			   struct rdma_cm_join_mc_attr_ex *mc_join_attr,
			   void *context);

/* Events: every event obtained must be released with rdma_ack_cm_event. */
int rdma_get_cm_event(struct rdma_event_channel *channel,
		      struct rdma_cm_event **event);
int rdma_ack_cm_event(struct rdma_cm_event *event);

/* Ports of the bound / connected addresses, in network byte order. */
__be16 rdma_get_src_port(struct rdma_cm_id *id);
__be16 rdma_get_dst_port(struct rdma_cm_id *id);

/* Local address of an id. */
static inline struct sockaddr *rdma_get_local_addr(struct rdma_cm_id *id)
{
	return &id->route.addr.src_addr;
}

/* Remote address of an id. */
static inline struct sockaddr *rdma_get_peer_addr(struct rdma_cm_id *id)
{
	return &id->route.addr.dst_addr;
}

/* NULL-terminated list of open device contexts; free with rdma_free_devices. */
struct ibv_context **rdma_get_devices(int *num_devices);
void rdma_free_devices(struct ibv_context **list);

/* Printable name of an event type. */
const char *rdma_event_str(enum rdma_cm_event_type event);

/* rdma_set_option levels. */
enum {
	RDMA_OPTION_ID		= 0,
	RDMA_OPTION_IB		= 1
};

/* rdma_set_option names for level RDMA_OPTION_ID. */
enum {
	RDMA_OPTION_ID_TOS	 = 0,	/* uint8_t, type of service */
	RDMA_OPTION_ID_REUSEADDR = 1,	/* int */
	RDMA_OPTION_ID_AFONLY	 = 2,	/* int */
	RDMA_OPTION_ID_ACK_TIMEOUT = 3	/* uint8_t */
};

/* rdma_set_option names for level RDMA_OPTION_IB. */
enum {
	RDMA_OPTION_IB_PATH	 = 1	/* array of struct ibv_path_data */
};

int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
		    void *optval, size_t optlen);
/* Move an id (and its pending events) to another channel. */
int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel);

/* Address translation; free the result with rdma_freeaddrinfo. */
int rdma_getaddrinfo(const char *node, const char *service,
		     const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res);
void rdma_freeaddrinfo(struct rdma_addrinfo *res);

/* QP attributes for the id's current state, for QPs the caller manages. */
int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
		      int *qp_attr_mask);

/* Enhanced connection establishment (ECE) for externally managed QPs. */
int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece);
int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece);

/*
 * RDMACM_1.4: asynchronous address resolution, reported as
 * RDMA_CM_EVENT_ADDRINFO_RESOLVED / _ERROR; fetch the result with
 * rdma_query_addrinfo and free it with rdma_freeaddrinfo.
 */
int rdma_resolve_addrinfo(struct rdma_cm_id *id, const char *node,
			  const char *service,
			  const struct rdma_addrinfo *hints);
int rdma_query_addrinfo(struct rdma_cm_id *id, struct rdma_addrinfo **info);

/* RDMACM_1.4: queue a caller-defined event (arg lands in param.arg). */
int rdma_write_cm_event(struct rdma_cm_id *id, enum rdma_cm_event_type event,
			int status, uint64_t arg);

#ifdef __cplusplus
}
#endif

#endif /* RDMA_CMA_H */
