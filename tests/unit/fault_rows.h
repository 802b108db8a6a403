// The fault-injection table: every operation that reaches the kernel, the
// commands it issues in order (its steps), what a fault at each step must
// give, and the errnos the kernel can answer each command with.
#pragma once

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "fault_bed.h"

namespace rdmacm::testing {

// What a fault at one step must give: the operation's errno (0: it
// succeeds), and how many kernel ids the library could not destroy. Those
// are its own ids whose cleanup failed; the kernel frees them with the
// channel's fd.
struct Answer {
  int err;
  size_t leftover = 0;
};
// The common answer: the call fails with the injected errno.
inline Answer fails(size_t, int err) { return {err}; }

enum class Retry {
  kSame,       // the operation succeeds when done again
  kFirstStep,  // only after a fault at step 1 (later ones consumed the event)
  kNever,      // the fault consumed what the operation needs: only destroyable
};

struct Row {
  const char* name;
  std::function<void(Bed&)> setup;
  std::function<int(Bed&)> op;  // 0, or -1 with errno
  std::vector<Cmd> steps;  // the commands it issues, in order
  Answer (*answer)(size_t step, int err) = fails;
  Retry retry = Retry::kSame;
  // Checks the state after the operation (its commands are not steps).
  std::function<void(Bed&)> after = [](Bed&) {};
};

inline void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

// Every row.
const std::vector<Row>& fault_rows();
// The errnos the kernel can answer this command with.
const std::vector<int>& kernel_errnos(Cmd command);

}  // namespace rdmacm::testing
