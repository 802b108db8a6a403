// The preload's fall back to kernel TCP after a failed RDMA connect: each
// decision is a line on RDMACM_TRACE, and RS_FALLBACK=0 makes the connect fail
// with the RDMA error instead. Runs in rxe_preload_tests (rxe.basics); the
// settings are read once per process, so each case runs this binary again
// with its environment.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "preload_helpers.h"

namespace rdmacm::rxe {
namespace {

// --- The fall back to kernel TCP: said on RDMACM_TRACE, and a setting ------

// Run in a child process of FallbackIsTracedAndRsFallback0TurnsItOff, with
// RS_FALLBACK and RDMACM_TRACE set there: connects to a kernel TCP listener
// on 127.0.0.1 (RoCE has no loopback: RDMA cannot reach it). Exit 0: the
// connect succeeded; 10 + errno's first digits otherwise (the errno written
// to stdout).
TEST(PreloadFallbackChild, ConnectToLoopback) {
  const char* port = getenv("PRELOAD_FALLBACK_PORT");
  if (!port) GTEST_SKIP() << "run by PreloadFallback.FallbackIsTracedAndRsFallback0TurnsItOff";
  int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(atoi(port)));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ret = connect(c, sa(&a), sizeof a);
  printf("errno=%d\n", ret ? errno : 0);
  fflush(stdout);
  _exit(ret ? 11 : 0);
}

// Exit status of this binary run as PreloadFallbackChild with `env` added;
// the trace it wrote into *trace.
int run_fallback_child(uint16_t port, const char* fallback, std::string* trace) {
  char path[] = "/tmp/preload_traceXXXXXX";
  int f = mkstemp(path);
  if (f < 0) return -1;
  close(f);
  pid_t child = fork();
  if (child == 0) {
    setenv("PRELOAD_FALLBACK_PORT", std::to_string(port).c_str(), 1);
    setenv("RDMACM_TRACE", path, 1);
    if (fallback)
      setenv("RS_FALLBACK", fallback, 1);
    else
      unsetenv("RS_FALLBACK");
    execl("/proc/self/exe", "rxe_preload_tests", "--gtest_filter=PreloadFallbackChild.*",
          nullptr);
    _exit(127);
  }
  int status = -1;
  waitpid(child, &status, 0);
  std::ifstream in(path);
  trace->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PreloadFallback, FallbackIsTracedAndRsFallback0TurnsItOff) {
  if (fork_safe()) GTEST_SKIP();
  // A kernel TCP listener the preload cannot see (raw system calls).
  int l = static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0));
  ASSERT_GE(l, 0);
  int one = 1;
  syscall(SYS_setsockopt, l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(7628);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(syscall(SYS_bind, l, sa(&a), sizeof a), 0) << strerror(errno);
  ASSERT_EQ(syscall(SYS_listen, l, 8), 0);
  std::string trace;
  EXPECT_EQ(run_fallback_child(7628, nullptr, &trace), 0) << "default: the connect falls back";
  EXPECT_NE(trace.find("RDMA connect to 127.0.0.1 port 7628 failed"), std::string::npos) << trace;
  EXPECT_NE(trace.find("connecting over kernel TCP instead"), std::string::npos) << trace;
  EXPECT_EQ(run_fallback_child(7628, "0", &trace), 11) << "RS_FALLBACK=0: the connect fails";
  EXPECT_NE(trace.find("RDMA connect to 127.0.0.1 port 7628 failed"), std::string::npos) << trace;
  EXPECT_NE(trace.find("no kernel TCP (RS_FALLBACK=0)"), std::string::npos) << trace;
  EXPECT_EQ(run_fallback_child(7628, "1", &trace), 0) << "RS_FALLBACK=1: as the default";
  syscall(SYS_close, l);
}

}  // namespace
}  // namespace rdmacm::rxe
