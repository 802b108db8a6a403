// Where the event pump's Event objects come from: a small cache of freed
// blocks, so that an event in a steady stream costs no malloc and no free
// (each Event is a shared_ptr's control block and the object in one block).
#pragma once

#include <memory>

#include "core/objects.h"

namespace rdmacm::core {

std::shared_ptr<Event> new_event();  // throws std::bad_alloc

}  // namespace rdmacm::core
