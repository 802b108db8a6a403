// The files under /etc/rdma/rsocket/ and the variables both libraries read
// once a process: the rsocket tunables (src/rsocket/config.cpp, rdma-core
// 44's rs_configure) and librspreload.so's preload_config and RS_* variables
// (preload/config.cpp, rdma-core 44's scan_config and getenv_options).
//
// Each case runs in a fresh copy of this binary (a "threadsafe" death test:
// re-executed, so nothing read before is cached) whose fopen() of
// /etc/rdma/rsocket/NAME opens NAME in a directory of the test's
// (RDMACM_TEST_RSOCKET_DIR, the fopen below): the code reads its real paths.
// The copy prints what it read; the test matches that line.
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../preload/config.h"
#include "rsocket/config.h"

namespace {

constexpr const char* kDirVariable = "RDMACM_TEST_RSOCKET_DIR";
constexpr const char* kEtc = "/etc/rdma/rsocket/";

FILE* real_fopen(const char* path, const char* mode) {
  using Fopen = FILE* (*)(const char*, const char*);
  static Fopen next = reinterpret_cast<Fopen>(dlsym(RTLD_NEXT, "fopen"));
  return next(path, mode);
}

}  // namespace

// This binary's fopen: /etc/rdma/rsocket/NAME is DIR/NAME while
// RDMACM_TEST_RSOCKET_DIR=DIR is set; every other path, and every path
// without it, is libc's.
extern "C" FILE* fopen(const char* path, const char* mode) {
  const char* dir = getenv(kDirVariable);
  size_t n = strlen(kEtc);
  if (dir && path && !strncmp(path, kEtc, n)) {
    std::string moved = std::string(dir) + "/" + (path + n);
    return real_fopen(moved.c_str(), mode);
  }
  return real_fopen(path, mode);
}

namespace {

class ConfigFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // The re-executed copy finds the directory its parent made.
    if (const char* d = getenv(kDirVariable)) {
      dir_ = d;
      return;
    }
    char name[] = "/tmp/rdmacm-etc-XXXXXX";
    ASSERT_NE(mkdtemp(name), nullptr) << strerror(errno);
    dir_ = name;
    owner_ = true;
    setenv(kDirVariable, name, 1);
  }
  void TearDown() override {
    if (!owner_) return;
    for (const std::string& f : files_) unlink((dir_ + "/" + f).c_str());
    rmdir(dir_.c_str());
    unsetenv(kDirVariable);
    for (const char* v : {"RS_SQ_SIZE", "RS_RQ_SIZE", "RS_INLINE", "RDMAV_FORK_SAFE", "RSOCKET_ZCOPY_MIN"})
      unsetenv(v);
  }
  void write(const char* name, const std::string& text) {
    files_.push_back(name);
    FILE* f = real_fopen((dir_ + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr) << strerror(errno);
    fputs(text.c_str(), f);
    fclose(f);
  }

  std::string dir_;
  bool owner_ = false;
  std::vector<std::string> files_;
};

// What the rsocket tunables came to, on stderr, then the copy's end.
[[noreturn]] void report_rsocket_config() {
  const rdmacm::rsocket::Config& c = rdmacm::rsocket::config();
  fprintf(stderr, "mem %u wmem %u inline %u sq %u rq %u iomap %u polling %u wake %d zcopy %llu\n",
          c.mem_default, c.wmem_default, c.inline_default, c.sqsize_default, c.rqsize_default,
          c.iomap_size, c.polling_time, c.wake_up_interval,
          static_cast<unsigned long long>(c.zcopy_min));
  fflush(stderr);
  _exit(0);
}

#define EXPECT_RSOCKET_CONFIG(line) \
  EXPECT_EXIT(report_rsocket_config(), ::testing::ExitedWithCode(0), line "\n")

TEST_F(ConfigFiles, RsocketDefaultsWithoutFiles) {
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 131072 inline 64 sq 384 rq 384 iomap 0 polling 10 wake 5000 zcopy 0");
}

TEST_F(ConfigFiles, RsocketReadsEveryFile) {
  write("mem_default", "65536\n");
  write("wmem_default", "32768\n");
  write("inline_default", "200\n");
  write("sqsize_default", "100\n");
  write("rqsize_default", "  300");  // leading space, no newline
  write("iomap_size", "64\n");
  write("polling_time", "0\n");
  write("wake_up_interval", "250 ms\n");  // the number, then anything
  EXPECT_RSOCKET_CONFIG("mem 65536 wmem 32768 inline 200 sq 100 rq 300 iomap 64 polling 0 wake 250 zcopy 0");
}

// Ours: the zero-copy threshold, from its file or (winning) the environment.
TEST_F(ConfigFiles, RsocketZeroCopyMinimumFromFileOrEnvironment) {
  write("zcopy_min", "65536\n");
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 131072 inline 64 sq 384 rq 384 iomap 0 polling 10 wake 5000 zcopy 65536");
  setenv("RSOCKET_ZCOPY_MIN", "0x100000", 1);
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 131072 inline 64 sq 384 rq 384 iomap 0 polling 10 wake 5000 zcopy 1048576");
}

// A file with no number leaves the default; an empty one too.
TEST_F(ConfigFiles, RsocketFilesWithoutANumberKeepTheDefaults) {
  write("mem_default", "lots\n");
  write("inline_default", "");
  write("sqsize_default", "#512\n");
  write("wake_up_interval", "\n\n");
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 131072 inline 64 sq 384 rq 384 iomap 0 polling 10 wake 5000 zcopy 0");
}

// rdma-core 44's floors: a receive buffer of at least 1 byte; a send buffer
// under the 2,048-byte low-water mark becomes twice that mark.
TEST_F(ConfigFiles, RsocketBufferFloors) {
  write("mem_default", "0\n");
  write("wmem_default", "2047\n");
  EXPECT_RSOCKET_CONFIG("mem 1 wmem 4096 inline 64 sq 384 rq 384 iomap 0 polling 10 wake 5000 zcopy 0");
}

// Numbers too wide for their field are cut to it, and negative ones wrap, as
// rdma-core 44's fscanf %hu/%u/%d stores them: 70000 in a 16-bit size is
// 4464, -1 there 65535; -1 ms between rpoll's checks stays -1.
TEST_F(ConfigFiles, RsocketNumbersAreCutToTheirField) {
  write("sqsize_default", "70000\n");
  write("rqsize_default", "-1\n");
  write("wmem_default", "4294967296\n");  // 2^32: 0, under the floor
  write("wake_up_interval", "-1\n");
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 4096 inline 64 sq 4464 rq 65535 iomap 0 polling 10 wake -1 zcopy 0");
}

// iomap_size is read as the 8-bit scale the wire carries (up to 128 a
// count, above it 128 | count / 256) and rounded through it, rdma-core 44's
// arithmetic: 128 stays, 200 (scale for 72 * 256) stays, 300 becomes 172.
TEST_F(ConfigFiles, RsocketIomapSizeIsRoundedThroughTheWireScale) {
  write("iomap_size", "128\n");
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 131072 inline 64 sq 384 rq 384 iomap 128 polling 10 wake 5000 zcopy 0");
  write("iomap_size", "200\n");
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 131072 inline 64 sq 384 rq 384 iomap 200 polling 10 wake 5000 zcopy 0");
  write("iomap_size", "300\n");
  EXPECT_RSOCKET_CONFIG("mem 131072 wmem 131072 inline 64 sq 384 rq 384 iomap 172 polling 10 wake 5000 zcopy 0");
}

// What librspreload.so's settings and rules came to for this program
// ("unit_tests"), on stderr, then the copy's end.
[[noreturn]] void report_preload_config() {
  const rspreload::Settings& s = rspreload::settings();
  fprintf(stderr, "sq %d rq %d inline %d fork %d tcp %d udp %d tcp6 %d unix %d\n", s.sq_size,
          s.rq_size, s.inline_size, s.fork_safe, rspreload::wanted(AF_INET, SOCK_STREAM, 0),
          rspreload::wanted(AF_INET, SOCK_DGRAM, 0), rspreload::wanted(AF_INET6, SOCK_STREAM, 0),
          rspreload::wanted(AF_UNIX, SOCK_STREAM, 0));
  fflush(stderr);
  _exit(0);
}

#define EXPECT_PRELOAD_CONFIG(line) \
  EXPECT_EXIT(report_preload_config(), ::testing::ExitedWithCode(0), line "\n")

// No preload_config: every TCP and UDP socket is taken; no variables: the
// rsocket defaults stand and fork support is off.
TEST_F(ConfigFiles, PreloadWithoutFileOrVariables) {
  EXPECT_PRELOAD_CONFIG("sq 0 rq 0 inline 0 fork 0 tcp 1 udp 1 tcp6 1 unix 0");
}

TEST_F(ConfigFiles, PreloadReadsItsRulesFromPreloadConfig) {
  write("preload_config", "# this binary's IPv4 TCP only\nunit_test INET STREAM TCP\n");
  EXPECT_PRELOAD_CONFIG("sq 0 rq 0 inline 0 fork 0 tcp 1 udp 0 tcp6 0 unix 0");
  write("preload_config", "rstream * * *\n");
  EXPECT_PRELOAD_CONFIG("sq 0 rq 0 inline 0 fork 0 tcp 0 udp 0 tcp6 0 unix 0");
}

// RS_SQ_SIZE, RS_RQ_SIZE, RS_INLINE and RDMAV_FORK_SAFE are atoi()'d as in
// rdma-core 44 (anything not a number is 0: the default, fork support off).
TEST_F(ConfigFiles, PreloadVariables) {
  setenv("RS_SQ_SIZE", "64", 1);
  setenv("RS_RQ_SIZE", "32x", 1);
  setenv("RS_INLINE", "0", 1);
  setenv("RDMAV_FORK_SAFE", "1", 1);
  EXPECT_PRELOAD_CONFIG("sq 64 rq 32 inline 0 fork 1 tcp 1 udp 1 tcp6 1 unix 0");
  setenv("RDMAV_FORK_SAFE", "yes", 1);
  EXPECT_PRELOAD_CONFIG("sq 64 rq 32 inline 0 fork 0 tcp 1 udp 1 tcp6 1 unix 0");
}

}  // namespace
