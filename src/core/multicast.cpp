// Multicast groups: join (plain and extended), leave, and leaving all of an
// id's groups when it is destroyed.
#include <cerrno>
#include <cstring>

#include "core/multicast.h"

#include "core/cm.h"
#include "core/events.h"
#include "core/id_state.h"
#include "core/objects.h"
#include "core/transport.h"

namespace rdmacm::core {
namespace {

// Drops one group of an id from the tables.
void forget_group(CmId& id, const Multicast& group) {
  Objects::get().groups.take(Objects::key(group.uid()));
  CmIdExtras* x = id.peek_extras();  // made by the join
  if (!x) return;
  LockGuard lock(x->mc_mutex);
  std::erase_if(x->groups, [&](const auto& g) { return g.get() == &group; });
}

int join(rdma_cm_id* pub, const sockaddr* addr, uint16_t flags, void* context) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  socklen_t len = addr_len(addr);
  if (!len) return -EINVAL;
  CmIdExtras& x = id->extras();  // throws std::bad_alloc: nothing done yet
  auto group = std::make_shared<Multicast>();
  group->id = id;
  group->context = context;
  group->join_flags = flags;
  std::memcpy(&group->addr, addr, len);
  group->addr_len = len;
  // Reachable before the command: the join event may race the answer.
  Objects::get().groups.add(Objects::key(group->uid()), group);
  {
    LockGuard lock(x.mc_mutex);
    x.groups.push_back(group);
  }
  int err = transport().join_mcast(id->fd(), id->handle, group->uid(), addr, len, flags,
                                   &group->handle);
  if (err) {
    forget_group(*id, *group);
    return err;
  }
  return complete(*id);
}

}  // namespace

int join_multicast(rdma_cm_id* id, const sockaddr* addr, void* context) {
  return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

int join_multicast_ex(rdma_cm_id* id, const rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (!attr) return -EINVAL;
  if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return -ENOTSUP;
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return -EINVAL;
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
    return -EINVAL;
  return join(id, attr->addr, static_cast<uint16_t>(attr->join_flags), context);
}

int leave_multicast(rdma_cm_id* pub, const sockaddr* addr) {
  auto id = find_id(pub);
  if (!id) return -EINVAL;
  socklen_t len = addr_len(addr);
  if (!len) return -EINVAL;
  CmIdExtras* x = id->peek_extras();
  if (!x) return -EADDRNOTAVAIL;  // never joined anything
  std::shared_ptr<Multicast> group;
  {
    LockGuard lock(x->mc_mutex);
    for (const auto& g : x->groups)
      if (g->addr_len == len && !std::memcmp(&g->addr, addr, len)) group = g;
  }
  if (!group) return -EADDRNOTAVAIL;  // never joined (or already left)
  {
    LockGuard lock(x->mc_mutex);
    if (group->leaving) return -EADDRNOTAVAIL;  // another thread leaves it
    group->leaving = true;
    std::erase(x->groups, group);
  }
  if (id->pub.qp && group->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
    ibv_detach_mcast(id->pub.qp, &group->mgid, group->mlid);
  uint32_t reported = 0;
  int err = transport().leave_mcast(id->fd(), group->handle, &reported);
  // A reader may hold one of the group's events taken from the kernel just
  // before the leave: it must still find the group to count it, so the table
  // lets go of the group only once every reported event is counted.
  if (!err)
    group->tally.wait(reported, [&] {
      warn_unacked("rdma_leave_multicast", pub, nullptr, group.get());
    });
  Objects::get().groups.take(Objects::key(group->uid()));
  return err;
}

void detach_groups(CmId& id) {
  CmIdExtras* x = id.peek_extras();
  if (!id.pub.qp || !x) return;
  LockGuard lock(x->mc_mutex);
  for (const auto& g : x->groups)
    if (g->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
      ibv_detach_mcast(id.pub.qp, &g->mgid, g->mlid);  // fails harmlessly if never attached
}

void forget_groups(CmId& id) {
  CmIdExtras* x = id.peek_extras();
  if (!x) return;  // never joined anything
  std::vector<std::shared_ptr<Multicast>> groups;
  {
    LockGuard lock(x->mc_mutex);
    groups.swap(x->groups);
  }
  for (const auto& g : groups) Objects::get().groups.take(Objects::key(g->uid()));
}

}  // namespace rdmacm::core
