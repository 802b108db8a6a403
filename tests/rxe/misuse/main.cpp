// Runs the misuse table (table.h): each row in a child process of its own,
// two at a time, its result compared with what the loaded library must give:
// ours, or with RDMACM_REFERENCE set rdma-core 44's (rdma_core_44.expected).
//
//   misuse_table [--only SUBSTRING] [--list] [--differences]
//
// Prints "PASS|FAIL <row>: got ..., want ..." per row and last
// "N passed, M failed". --differences prints the rows where ours and
// rdma-core answer differently, with the reason, and runs nothing; it fails
// if a difference has no reason or a row has no measured rdma-core answer.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "../../common/time_scale.h"
#include "table.h"

using namespace rdmacm::misuse;

namespace {

// Rows at a time: one per CPU (a row is mostly process start and library
// set-up: more rows than CPUs only make each wait longer for its events).
size_t rows_at_once() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 1 ? static_cast<size_t>(n) : 1;
}

// A row running in a child process, its result arriving on a pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t row = 0;
  std::string out;
};

Child start(const Row& row, size_t index) {
  int fds[2];
  if (pipe(fds)) std::abort();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    setup_report_fd = fds[1];
    alarm(static_cast<unsigned>(rdmacm::test::scaled_s(10)));
    State state;
    reset_errno();
    std::string r = row.call(state);
    alarm(0);
    (void)!write(fds[1], r.data(), r.size());
    // The answer is in: the parent goes on while this process exits (the
    // kernel may hold an exit for a while to tear down its ids).
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  return {pid, fds[0], index, {}};
}

// The row's result: what the call gave, or the signal that ended it, HANG
// after 10 s (scaled: tests/common/time_scale.h), or "SETUP <why>" if its
// objects could not be made.
// Processes that gave their answer and are still exiting: reaped later
// (reap_exiting), so that a slow exit does not hold the next rows.
std::vector<Child> exiting;

std::string signal_name(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? std::string("SIG") + name : "signal " + std::to_string(sig);
}

std::string finish(Child& c) {
  char buf[256];
  ssize_t n;
  while ((n = read(c.fd, buf, sizeof(buf))) > 0) c.out.append(buf, n);
  close(c.fd);
  int status = 0;
  pid_t done = 0;
  if (!c.out.empty() && c.out.rfind("SETUP", 0) != 0) {
    done = waitpid(c.pid, &status, WNOHANG);
    if (done == 0) {
      exiting.push_back(c);
      return c.out;
    }
  }
  if (done != c.pid) waitpid(c.pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM) return "HANG";
    return signal_name(sig);
  }
  return c.out;  // on exit 99, "SETUP <why>"

}

std::map<std::string, std::string> load_reference() {
  std::map<std::string, std::string> ref;
  std::ifstream f(MISUSE_REFERENCE_FILE);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto tab = line.find('\t');
    if (tab != std::string::npos) ref[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return ref;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  bool list = false, differences = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--list")) list = true;
    else if (!std::strcmp(argv[i], "--differences")) differences = true;
    else {
      std::fprintf(stderr, "usage: %s [--only SUBSTRING] [--list] [--differences]\n", argv[0]);
      return 2;
    }
  }
  std::vector<Row> rows;
  add_channel_rows(rows);
  add_id_rows(rows);
  add_connection_rows(rows);
  add_qp_rows(rows);
  add_other_rows(rows);
  auto ref = load_reference();

  if (differences) {
    int differ = 0, bad = 0;
    for (const Row& r : rows) {
      auto it = ref.find(r.name);
      if (it == ref.end()) {
        std::printf("NO ANSWER OF RDMA-CORE: %s\n", r.name.c_str());
        ++bad;
        continue;
      }
      if (r.ours == it->second) continue;
      ++differ;
      if (r.why.empty()) ++bad;
      std::printf("%s: rdma-core %s, ours %s: %s\n", r.name.c_str(), it->second.c_str(),
                  r.ours.c_str(), r.why.empty() ? "NO REASON GIVEN" : r.why.c_str());
    }
    std::printf("%zu rows, %d differ from rdma-core 44, %d without a reason or an answer\n",
                rows.size(), differ, bad);
    return bad ? 1 : 0;
  }
  if (list) {
    for (const Row& r : rows) std::printf("%s\n", r.name.c_str());
    return 0;
  }

  bool reference = std::getenv("RDMACM_REFERENCE") != nullptr;
  int passed = 0, failed = 0, flaky = 0;
  std::vector<size_t> todo;
  for (size_t i = 0; i < rows.size(); ++i)
    if (only.empty() || rows[i].name.find(only) != std::string::npos) todo.push_back(i);
  std::vector<Child> running;
  const size_t parallel = rows_at_once();
  size_t next = 0;
  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && running.size() < parallel) {
      running.push_back(start(rows[todo[next]], todo[next]));
      ++next;
    }
    // The first child to finish (its pipe closes) is reported first.
    std::vector<pollfd> fds;
    for (const Child& c : running) fds.push_back({c.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), -1);
    for (size_t i = 0; i < running.size(); ++i) {
      if (!fds[i].revents) continue;
      Child c = running[i];
      running.erase(running.begin() + static_cast<long>(i));
      const Row& r = rows[c.row];
      std::string got = finish(c);
      if (got.rfind("SETUP", 0) == 0) {
        // Not the row's answer: its objects could not be made (a busy VM).
        // Said, then run once more on its own.
        std::printf("RETRY %s: %s\n", r.name.c_str(), got.c_str());
        Child again = start(r, c.row);
        got = finish(again);
      }
      std::string want = reference ? (ref.count(r.name) ? ref[r.name] : "unmeasured") : r.ours;
      bool ok = want == "any" || got == want;
      if (!ok && (reference || got.rfind("SIG", 0) != 0)) {
        // The rerun rule (tests/rxe/runner/judge.py): a wrong answer runs once
        // more at once, and the second counts; never after a signal in a
        // process on our library.
        std::printf("FLAKY misuse %s: got %s, want %s\n", r.name.c_str(), got.c_str(), want.c_str());
        ++flaky;
        Child again = start(r, c.row);
        got = finish(again);
        ok = got == want;
      }
      (ok ? passed : failed)++;
      std::printf("%s %s: got %s, want %s\n", ok ? "PASS" : "FAIL", r.name.c_str(), got.c_str(),
                  want.c_str());
      std::fflush(stdout);
      break;
    }
  }
  // A process that died of a signal after its answer failed all the same.
  for (Child& c : exiting) {
    int status = 0;
    waitpid(c.pid, &status, 0);
    if (WIFSIGNALED(status)) {
      ++failed;
      std::printf("FAIL %s: died of %s after its answer\n", rows[c.row].name.c_str(),
                  signal_name(WTERMSIG(status)).c_str());
    }
  }
  if (flaky) std::printf("misuse: %d FLAKY reruns (lines above)\n", flaky);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
