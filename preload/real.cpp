#include "real.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

namespace rspreload {

void* next_symbol(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (!fn) {
    fprintf(stderr, "librspreload: the C library has no %s\n", name);
    abort();
  }
  return fn;
}

}  // namespace rspreload
