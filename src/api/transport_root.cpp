// The composition root: the one place that decides which transport the core
// talks to. The library's is the kernel's rdma_cm (providers/ucma); the core
// and the provider know nothing of each other beyond core/transport.h.
//
// Installed by a static constructor, which runs when the library is loaded
// and before any library or program that depends on it runs its own: it only
// stores a pointer (loading still does no I/O; the device opens on first use).
#include "core/transport.h"
#include "providers/ucma/kernel_transport.h"

namespace {

[[gnu::constructor]] void install_kernel_transport() {
  rdmacm::core::install_transport(&rdmacm::ucma::kernel_transport());
}

}  // namespace
