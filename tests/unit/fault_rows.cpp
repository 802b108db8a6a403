#include "fault_rows.h"

#include <map>

namespace rdmacm::testing {
namespace {

// The errnos the kernel (drivers/infiniband/core/ucma.c and what it calls)
// can give for each command. Every write command can also fail its own
// checks: a bad handle (ENOENT), another file's id or a bad length (EINVAL),
// unreadable user memory (EFAULT). EINTR reaches the library from GET_EVENT
// only: the provider sends any other interrupted command again.
const std::map<Cmd, std::vector<int>>& errno_table() {
  static const std::map<Cmd, std::vector<int>> table = {
      // open("/dev/infiniband/rdma_cm"); a device cgroup answers EPERM.
      {Cmd::open_channel, {ENOENT, ENODEV, EACCES, EPERM, EMFILE, ENFILE, ENOMEM}},
      {Cmd::create_id, {EINVAL, EACCES, EFAULT, ENOMEM}},
      {Cmd::destroy_id, {EINVAL, ENOENT, EFAULT}},
      {Cmd::bind, {EINVAL, ENOENT, EADDRINUSE, EADDRNOTAVAIL, EAFNOSUPPORT, EACCES, ENODEV, ENOMEM}},
      {Cmd::resolve_addr,
       {EINVAL, ENOENT, EADDRINUSE, EADDRNOTAVAIL, EAFNOSUPPORT, ENETUNREACH, EHOSTUNREACH,
        ENODEV, ENOMEM}},
      {Cmd::query_addr, {EINVAL, ENOENT, EFAULT, ENOSPC}},
      {Cmd::query_gid, {EINVAL, ENOENT, EFAULT, ENOSPC, ENOSYS}},
      {Cmd::query_path, {EINVAL, ENOENT, EFAULT, ENOSPC, ENOMEM}},
      {Cmd::get_event, {EINTR, EAGAIN, EINVAL, EFAULT, ENOSPC, ENOMEM}},
      {Cmd::resolve_route, {EINVAL, ENOENT, ENODEV, ENETUNREACH, ENOMEM, ENOSYS, ETIMEDOUT}},
      {Cmd::connect,
       {EINVAL, ENOENT, ENODEV, ENOMEM, ENETUNREACH, ECONNREFUSED, ETIMEDOUT, EBUSY}},
      {Cmd::listen, {EINVAL, ENOENT, EADDRINUSE, EADDRNOTAVAIL, ENODEV, ENOMEM}},
      {Cmd::accept, {EINVAL, ENOENT, ENODEV, ENOMEM, ECONNRESET, ETIMEDOUT}},
      {Cmd::reject, {EINVAL, ENOENT, ENODEV, ENOMEM}},
      {Cmd::disconnect, {EINVAL, ENOENT, ENODEV, ENOMEM, ENOTCONN}},
      {Cmd::init_qp_attr, {EINVAL, ENOENT, ENODEV, EFAULT, ENOSYS}},
      {Cmd::notify, {EINVAL, ENOENT, ENODEV, ENOSYS}},
      {Cmd::set_option, {EINVAL, ENOENT, EFAULT, ENOMEM, ENOSYS, ENOPROTOOPT}},
      {Cmd::migrate_id, {EINVAL, ENOENT, EBADF, EFAULT, ENOMEM}},
      {Cmd::join_mcast,
       {EINVAL, ENOENT, EADDRINUSE, EADDRNOTAVAIL, ENETUNREACH, ENODEV, ENOMEM, ENOSYS}},
      {Cmd::leave_mcast, {EINVAL, ENOENT, ENXIO, EFAULT}},
  };
  return table;
}

// A step the library takes to clean up after itself (destroying a doorbell,
// see core/user_events.cpp): it cannot report that failure, and need not.
template <size_t kCleanup>
Answer cleanup_at(size_t step, int err) {
  return step == kCleanup ? Answer{0, 1} : Answer{err};
}
// A connection request whose new id cannot be set up is dropped, as
// rdma-core drops it; the call goes on to the next event (none: EAGAIN).
template <size_t kFirstSetupStep>
Answer drops_request_from(size_t step, int err) {
  return step >= kFirstSetupStep ? Answer{EAGAIN} : Answer{err};
}

rdma_conn_param kParam{};  // all defaults

int created(Bed& b, rdma_event_channel* ch, rdma_port_space ps = RDMA_PS_TCP) {
  rdma_cm_id* id = nullptr;
  int ret = rdma_create_id(ch, &id, nullptr, ps);
  if (!ret) b.keep(id);
  return ret;
}

int destroyed(Bed& b) {
  int ret = rdma_destroy_id(b.id);
  if (!ret) b.forget(b.id);
  return ret;
}

}  // namespace

const std::vector<Row>& fault_rows() {
  using S = std::vector<Cmd>;
  auto none = [](Bed&) {};
  static const std::vector<Row> table = {
      // Channels and ids.
      {"CreateEventChannel", none,
       [](Bed&) {
         rdma_event_channel* ch = rdma_create_event_channel();
         if (!ch) return -1;
         rdma_destroy_event_channel(ch);
         return 0;
       },
       S{Cmd::open_channel}},
      {"CreateId", none, [](Bed& b) { return created(b, b.channel); }, S{Cmd::create_id}},
      {"CreateSyncId", none, [](Bed& b) { return created(b, nullptr); },
       S{Cmd::open_channel, Cmd::create_id}},
      {"DestroyId", [](Bed& b) { make(b); }, destroyed, S{Cmd::destroy_id}},
      {"DestroySyncIdWithStoredEvent", [](Bed& b) { resolved(b, true); }, destroyed,
       S{Cmd::destroy_id}},
      {"DestroyIdWithQueuedUserEvent", queued_user_event, destroyed,
       S{Cmd::destroy_id, Cmd::destroy_id}, cleanup_at<2>},
      {"DestroyIdWithGroup", [](Bed& b) { joined(b); }, destroyed, S{Cmd::destroy_id}},
      {"DestroyEpWithQp", [](Bed& b) { routed_with_qp(b, true); },
       [](Bed& b) {
         errno = 0;
         rdma_destroy_ep(b.id);  // void: errno tells
         if (errno) return -1;
         b.forget(b.id);
         return 0;
       },
       S{Cmd::destroy_id}},
      {"BindAddr", [](Bed& b) { make(b); },
       [](Bed& b) { return rdma_bind_addr(b.id, addr("10.0.0.1", 7471)); },
       S{Cmd::bind, Cmd::query_addr, Cmd::query_gid}},
      {"ResolveAddr", [](Bed& b) { make(b); },
       [](Bed& b) { return rdma_resolve_addr(b.id, nullptr, addr("10.0.0.2"), 100); },
       S{Cmd::resolve_addr}},
      {"ResolveAddrSync", [](Bed& b) { make(b, true); },
       [](Bed& b) { return rdma_resolve_addr(b.id, nullptr, addr("10.0.0.2"), 100); },
       S{Cmd::resolve_addr, Cmd::get_event, Cmd::query_addr, Cmd::query_gid}},
      {"ResolveRoute", [](Bed& b) { resolved(b); },
       [](Bed& b) { return rdma_resolve_route(b.id, 100); }, S{Cmd::resolve_route}},
      {"ResolveRouteSync", [](Bed& b) { resolved(b, true); },
       [](Bed& b) { return rdma_resolve_route(b.id, 100); },
       S{Cmd::resolve_route, Cmd::get_event, Cmd::query_path}},
      {"SetOption", [](Bed& b) { make(b); },
       [](Bed& b) {
         uint8_t tos = 32;
         return rdma_set_option(b.id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos));
       },
       S{Cmd::set_option}},
      {"Notify", [](Bed& b) { make(b); },
       [](Bed& b) { return rdma_notify(b.id, IBV_EVENT_COMM_EST); }, S{Cmd::notify}},
      {"InitQpAttr", [](Bed& b) { routed(b); },
       [](Bed& b) {
         ibv_qp_attr attr{};
         attr.qp_state = IBV_QPS_INIT;
         int mask = 0;
         return rdma_init_qp_attr(b.id, &attr, &mask);
       },
       S{Cmd::init_qp_attr}},
      {"CreateQp", [](Bed& b) { routed(b); },
       [](Bed& b) {
         ibv_qp_init_attr attr{};
         attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
         return rdma_create_qp(b.id, nullptr, &attr);
       },
       S{Cmd::init_qp_attr}},
      {"CreateUdQp",
       [](Bed& b) {
         make(b, false, RDMA_PS_UDP);
         ASSERT_EQ(rdma_resolve_addr(b.id, nullptr, addr("10.0.0.2"), 100), 0);
         ASSERT_EQ(outcome(b, RDMA_CM_EVENT_ADDR_RESOLVED), 0);
       },
       [](Bed& b) {
         ibv_qp_init_attr attr{};
         attr.qp_type = IBV_QPT_UD;
         attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
         return rdma_create_qp(b.id, nullptr, &attr);
       },
       S{Cmd::init_qp_attr}},

      // Connections.
      {"Connect", [](Bed& b) { routed(b); },
       [](Bed& b) { return rdma_connect(b.id, &kParam); }, S{Cmd::connect}},
      {"ConnectSync", [](Bed& b) { routed(b, true); },
       [](Bed& b) { return rdma_connect(b.id, &kParam); }, S{Cmd::connect, Cmd::get_event}},
      // With a QP the library answers the response: QP to RTR and RTS, then RTU.
      {"ConnectSyncWithQp", [](Bed& b) { routed_with_qp(b, true); },
       [](Bed& b) { return rdma_connect(b.id, nullptr); },
       S{Cmd::connect, Cmd::get_event, Cmd::init_qp_attr, Cmd::init_qp_attr, Cmd::init_qp_attr, Cmd::accept}},
      {"Establish", [](Bed& b) { connected(b, false); },
       [](Bed& b) { return rdma_establish(b.id); }, S{Cmd::accept}},
      {"Listen",
       [](Bed& b) {
         make(b);
         ASSERT_EQ(rdma_bind_addr(b.id, addr("10.0.0.1", 7471)), 0);
       },
       [](Bed& b) { return rdma_listen(b.id, 4); }, S{Cmd::listen, Cmd::query_addr}},
      {"Accept", requested, [](Bed& b) { return rdma_accept(b.id, &kParam); }, S{Cmd::accept}},
      {"AcceptWithQp",
       [](Bed& b) {
         requested(b);
         ASSERT_EQ(add_qp(b.id), 0);
       },
       [](Bed& b) { return rdma_accept(b.id, nullptr); },
       S{Cmd::init_qp_attr, Cmd::init_qp_attr, Cmd::init_qp_attr, Cmd::accept}},
      {"AcceptSync",
       [](Bed& b) {
         sync_listener(b);
         ASSERT_EQ(get_request(b), 0);
       },
       [](Bed& b) { return rdma_accept(b.id, &kParam); }, S{Cmd::accept, Cmd::get_event}},
      {"Reject", requested, [](Bed& b) { return rdma_reject(b.id, "no", 2); }, S{Cmd::reject}},
      {"Disconnect", [](Bed& b) { connected(b, false); },
       [](Bed& b) { return rdma_disconnect(b.id); }, S{Cmd::disconnect}},
      {"DisconnectSync", [](Bed& b) { connected(b, true); },
       [](Bed& b) { return rdma_disconnect(b.id); }, S{Cmd::disconnect, Cmd::get_event}},

      // Migration. Queued user events follow the id; one that cannot move
      // (its new doorbell fails) stays where it was (core/user_events.cpp),
      // and is still delivered once.
      {"MigrateId",
       [](Bed& b) {
         make(b);
         second_channel(b);
       },
       [](Bed& b) { return rdma_migrate_id(b.id, b.other); }, S{Cmd::migrate_id}},
      {"MigrateIdToSync", [](Bed& b) { make(b); },
       [](Bed& b) {
         int ret = rdma_migrate_id(b.id, nullptr);
         if (!ret) nonblocking(b.id->channel->fd);
         return ret;
       },
       S{Cmd::open_channel, Cmd::migrate_id}},
      {"MigrateIdWithUserEvent",
       [](Bed& b) {
         queued_user_event(b);
         second_channel(b);
       },
       [](Bed& b) { return rdma_migrate_id(b.id, b.other); },
       S{Cmd::migrate_id, Cmd::create_id, Cmd::resolve_addr, Cmd::destroy_id},
       [](size_t step, int err) {
         return step == 1 ? Answer{err} : step == 4 ? Answer{0, 1} : Answer{0};
       },
       Retry::kSame, [](Bed& b) { EXPECT_EQ(user_events(b), 1) << "delivered once"; }},
      // Nobody reads a synchronous id's channel: its queued events go.
      {"MigrateIdToSyncWithUserEvent", queued_user_event,
       [](Bed& b) { return rdma_migrate_id(b.id, nullptr); },
       S{Cmd::open_channel, Cmd::migrate_id, Cmd::destroy_id}, cleanup_at<3>},

      // Multicast. A failed leave forgets the group all the same, as
      // rdma-core does (the id's destroy leaves it in the kernel).
      {"JoinMulticast", [](Bed& b) { make(b, false, RDMA_PS_UDP); },
       [](Bed& b) { return rdma_join_multicast(b.id, addr("239.1.1.1"), nullptr); },
       S{Cmd::join_mcast}},
      {"JoinMulticastSync", [](Bed& b) { make(b, true, RDMA_PS_UDP); },
       [](Bed& b) { return rdma_join_multicast(b.id, addr("239.1.1.1"), nullptr); },
       S{Cmd::join_mcast, Cmd::get_event}},
      {"JoinMulticastEx", [](Bed& b) { make(b, false, RDMA_PS_UDP); },
       [](Bed& b) {
         rdma_cm_join_mc_attr_ex attr{};
         attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
         attr.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
         attr.addr = addr("239.1.1.2");
         return rdma_join_multicast_ex(b.id, &attr, nullptr);
       },
       S{Cmd::join_mcast}},
      {"LeaveMulticast", [](Bed& b) { joined(b); },
       [](Bed& b) { return rdma_leave_multicast(b.id, addr("239.1.1.1")); },
       S{Cmd::leave_mcast}, fails, Retry::kNever},

      // Events: what the library does with each before handing it out. A
      // failed query turns the event into its error event with the errno as
      // status, as rdma-core does.
      {"GetEvent",
       [](Bed& b) {
         make(b);
         b.fake.queue_event(b.channel->fd, uid(b.id), RDMA_CM_EVENT_ADDR_CHANGE, 0);
       },
       [](Bed& b) { return outcome(b, RDMA_CM_EVENT_ADDR_CHANGE); }, S{Cmd::get_event}, fails,
       Retry::kFirstStep},
      {"GetAddrResolved",
       [](Bed& b) {
         make(b);
         ASSERT_EQ(rdma_resolve_addr(b.id, nullptr, addr("10.0.0.2"), 100), 0);
       },
       [](Bed& b) { return outcome(b, RDMA_CM_EVENT_ADDR_RESOLVED); },
       S{Cmd::get_event, Cmd::query_addr, Cmd::query_gid}, fails, Retry::kFirstStep},
      {"GetRouteResolved",
       [](Bed& b) {
         resolved(b);
         ASSERT_EQ(rdma_resolve_route(b.id, 100), 0);
       },
       [](Bed& b) { return outcome(b, RDMA_CM_EVENT_ROUTE_RESOLVED); },
       S{Cmd::get_event, Cmd::query_path}, fails, Retry::kFirstStep},
      {"GetConnectResponseWithQp",
       [](Bed& b) {
         routed_with_qp(b, false);
         ASSERT_EQ(rdma_connect(b.id, nullptr), 0);
       },
       [](Bed& b) { return outcome(b, RDMA_CM_EVENT_ESTABLISHED); },
       S{Cmd::get_event, Cmd::init_qp_attr, Cmd::init_qp_attr, Cmd::init_qp_attr, Cmd::accept}, fails,
       Retry::kFirstStep},
      {"GetConnectRequest",
       [](Bed& b) {
         make(b);
         ASSERT_EQ(rdma_listen(b.id, 1), 0);
         b.fake.queue_request(b.channel->fd, uid(b.id));
       },
       [](Bed& b) { return outcome(b, RDMA_CM_EVENT_CONNECT_REQUEST); },
       S{Cmd::get_event, Cmd::query_addr, Cmd::query_gid, Cmd::query_path}, drops_request_from<2>,
       Retry::kFirstStep},
      {"GetRequest", [](Bed& b) { sync_listener(b); }, get_request,
       S{Cmd::get_event, Cmd::open_channel, Cmd::migrate_id, Cmd::query_addr, Cmd::query_gid, Cmd::query_path},
       drops_request_from<2>, Retry::kFirstStep},
      // The new id's QP fails: the request stays on the listener's stored
      // event for the application to refuse, as with rdma-core.
      {"GetRequestWithQp", [](Bed& b) { sync_listener(b, true); }, get_request,
       S{Cmd::get_event, Cmd::open_channel, Cmd::migrate_id, Cmd::query_addr, Cmd::query_gid, Cmd::query_path,
         Cmd::init_qp_attr},
       [](size_t step, int err) { return step >= 2 && step < 7 ? Answer{EAGAIN} : Answer{err}; },
       Retry::kFirstStep},
      {"GetMulticastJoin", [](Bed& b) { joined(b); },
       [](Bed& b) { return outcome(b, RDMA_CM_EVENT_MULTICAST_JOIN); }, S{Cmd::get_event}, fails,
       Retry::kFirstStep},
      // A queued event's doorbell is destroyed when the event is read.
      {"GetUserEvent", queued_user_event,
       [](Bed& b) { return outcome(b, RDMA_CM_EVENT_USER); }, S{Cmd::get_event, Cmd::destroy_id},
       cleanup_at<2>, Retry::kFirstStep},

      // Events from user space and endpoints.
      {"WriteCmEvent", [](Bed& b) { make(b); },
       [](Bed& b) { return rdma_write_cm_event(b.id, RDMA_CM_EVENT_USER, 0, 1); },
       S{Cmd::create_id, Cmd::resolve_addr}},
      // The resolver thread rings the doorbell (step 2). KNOWN GAP: if the
      // kernel refuses that, no event ever comes (the result is still kept
      // for rdma_query_addrinfo): the get below finds none (EAGAIN).
      {"ResolveAddrinfo", [](Bed& b) { make(b); },
       [](Bed& b) {
         size_t start = b.fake.commands().size();
         if (rdma_resolve_addrinfo(b.id, "127.0.0.1", "7471", nullptr)) return -1;
         if (b.fault_step == 2)
           wait_for_commands(b, start + 3);  // the resolver's failed doorbell, destroyed
         else
           readable(b.channel->fd);  // the resolver rang
         int ret = outcome(b, RDMA_CM_EVENT_ADDRINFO_RESOLVED);
         int err = errno;
         rdma_addrinfo* info = nullptr;
         if (rdma_query_addrinfo(b.id, &info) == 0) rdma_freeaddrinfo(info);
         errno = err;
         return ret;
       },
       S{Cmd::create_id, Cmd::resolve_addr, Cmd::get_event, Cmd::destroy_id},
       [](size_t step, int err) {
         return step == 2 ? Answer{EAGAIN} : step == 4 ? Answer{0, 1} : Answer{err};
       }},
      {"CreateEpActive", none,
       [](Bed& b) {
         rdma_addrinfo res{};
         res.ai_port_space = RDMA_PS_TCP;
         res.ai_qp_type = IBV_QPT_RC;
         res.ai_dst_addr = addr("10.0.0.2", 7471);
         res.ai_dst_len = sizeof(sockaddr_in);
         ibv_qp_init_attr attr{};
         attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
         rdma_cm_id* id = nullptr;
         int ret = rdma_create_ep(&id, &res, nullptr, &attr);
         if (!ret) b.keep(id);
         return ret;
       },
       S{Cmd::open_channel, Cmd::create_id, Cmd::resolve_addr, Cmd::get_event, Cmd::query_addr, Cmd::query_gid,
         Cmd::resolve_route, Cmd::get_event, Cmd::query_path, Cmd::init_qp_attr}},
      {"CreateEpPassive", none,
       [](Bed& b) {
         rdma_addrinfo res{};
         res.ai_flags = RAI_PASSIVE;
         res.ai_port_space = RDMA_PS_TCP;
         res.ai_qp_type = IBV_QPT_RC;
         res.ai_src_addr = addr("10.0.0.1", 7471);
         res.ai_src_len = sizeof(sockaddr_in);
         rdma_cm_id* id = nullptr;
         int ret = rdma_create_ep(&id, &res, nullptr, nullptr);
         if (!ret) b.keep(id);
         return ret;
       },
       S{Cmd::open_channel, Cmd::create_id, Cmd::bind, Cmd::query_addr, Cmd::query_gid}},
  };
  return table;
}

const std::vector<int>& kernel_errnos(Cmd command) {
  return errno_table().at(command);
}

}  // namespace rdmacm::testing
