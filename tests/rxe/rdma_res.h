// This process's objects on the device as the kernel lists them (`rdma res
// show KIND`): one line each. The kernel names an object by the thread that
// made it (a thread since gone, for an accepted end's or a spare endpoint's):
// ours by our command name, which our threads inherit.
#pragma once

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace rdmacm::rxe {

// kind: "mr", "qp", ...; *text gets the tool's whole output.
inline std::vector<std::string> own_resources(const char* kind, std::string* text = nullptr) {
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  std::string out;
  if (FILE* f = popen(("rdma res show " + std::string(kind) + " 2>&1").c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
    pclose(f);
  }
  std::vector<std::string> lines;
  static const std::regex named(R"( comm (\S+))");
  std::smatch m;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, named) && m[1] == comm) lines.push_back(line);
  if (text) *text = out;
  return lines;
}

}  // namespace rdmacm::rxe
