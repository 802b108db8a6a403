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

// How an operator tells this file from rdma-core's librdmacm.so.1 (the
// rdmacm-which tool looks for it): a string in the file, not a symbol, since
// the library exports the API and nothing else.
[[gnu::used]] const char library_ident[] =
    "rdmacm-ident: rdmacm " RDMACM_VERSION " (drop-in librdmacm)";

[[gnu::constructor]] void install_kernel_transport() {
  rdmacm::core::install_transport(&rdmacm::ucma::kernel_transport());
}

}  // namespace
