// The kernel's rdma_cm as a core::Transport. Only the composition root
// (src/api/transport_root.cpp) names it.
#pragma once

#include "core/transport.h"

namespace rdmacm::ucma {

core::Transport& kernel_transport();

}  // namespace rdmacm::ucma
