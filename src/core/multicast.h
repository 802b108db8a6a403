// What destroying an id or its QP needs of core/multicast.cpp.
#pragma once

#include "core/objects.h"

namespace rdmacm::core {

// Drops all groups of an id from the tables (the kernel left them with the id).
void forget_groups(CmId& id);
// Detaches the id's QP from the groups it joined (before the QP goes: the
// kernel refuses to destroy a QP still attached to a group, EBUSY).
void detach_groups(CmId& id);

}  // namespace rdmacm::core
