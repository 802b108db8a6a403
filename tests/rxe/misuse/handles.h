// Rows for a call taking an id, given each kind of bad id: NULL, destroyed
// (dangling) and forged (never made by the library).
#pragma once

#include "table.h"

namespace rdmacm::misuse {

// call(state, id) returns the row's result for that id; ours answers
// `ours` (by default -1/EINVAL) for each.
inline void add_bad_id_rows(std::vector<Row>& rows, const std::string& fn,
                            std::function<std::string(State&, rdma_cm_id*)> call,
                            const std::string& ours = "-1 EINVAL") {
  const char* why = "ours validates every handle against its live objects";
  rows.push_back({fn + "(NULL id)", ours, [call](State& s) { return call(s, nullptr); }, why});
  rows.push_back({fn + "(destroyed id)", ours,
                  [call](State& s) { rdma_cm_id* id = s.dead_id(); reset_errno();
                                     return call(s, id); }, why});
  rows.push_back({fn + "(forged id)", ours, [call](State& s) { return call(s, s.forged_id()); }, why});
}

}  // namespace rdmacm::misuse
