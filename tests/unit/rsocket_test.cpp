// The rsocket wing without a device: the wire format against bytes captured
// from rdma-core, and every call's answer to bad input (the fake kernel gives
// a stream rsocket its CM id; nothing here connects).
#include <rdma/rsocket.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "fixture.h"
#include "rsocket/protocol.h"

namespace rdmacm::testing {
namespace {

namespace wire = rdmacm::rsocket::wire;

// The connection request rdma-core 44's rstream client sent (captured on
// Soft-RoCE with a plain rdma_cm listener printing the private data: 56 bytes,
// the kernel pads the 40 of rsockets' connection data), rstream -S 100, so
// SO_RCVBUF 512 KiB (a 1 MiB receive buffer, half of it offered).
constexpr uint8_t kCapturedRequest[56] = {
    0x01, 0x02, 0x01, 0x80, 0x00, 0x00, 0x00, 0x00,  // version 1, iomap flag, 384 credits
    0x00, 0x00, 0x56, 0x4f, 0xc3, 0xde, 0xe0, 0x00,  // target SGL: address
    0x00, 0x00, 0x03, 0x8e, 0x00, 0x00, 0x00, 0x02,  // its rkey, 2 entries
    0x00, 0x00, 0x7f, 0x02, 0x87, 0xef, 0xf0, 0x00,  // data buffer: address
    0x00, 0x00, 0x04, 0x96, 0x00, 0x08, 0x00, 0x00,  // its rkey, 512 KiB
};

TEST(RsocketWire, DecodesRdmaCoresConnectionData) {
  wire::ConnData c;
  std::memcpy(&c, kCapturedRequest, sizeof(c));
  wire::PeerConnData p = wire::decode_conn_data(c);
  EXPECT_EQ(c.version, wire::kVersion);
  EXPECT_EQ(p.credits, 384);
  EXPECT_EQ(p.target_sgl.addr, 0x564fc3dee000u);
  EXPECT_EQ(p.target_sgl.key, 0x38eu);
  EXPECT_EQ(p.target_sgl.length, wire::kTargetSglSize);
  EXPECT_EQ(p.data_buf.addr, 0x7f0287eff000u);
  EXPECT_EQ(p.data_buf.key, 0x496u);
  EXPECT_EQ(p.data_buf.length, 512u * 1024);
  EXPECT_FALSE(p.swap_sgl);  // both little-endian
  // The iomap table follows the target SGL, under the same key; none offered.
  EXPECT_EQ(p.iomap.addr, p.target_sgl.addr + 2 * sizeof(wire::Sge));
  EXPECT_EQ(p.iomap.key, p.target_sgl.key);
  EXPECT_EQ(p.iomap.length, 0u);
}

TEST(RsocketWire, EncodesWhatRdmaCoreSends) {
  wire::ConnData c = wire::encode_conn_data(384, 0, {0x564fc3dee000, 0x38e, 2},
                                            {0x7f0287eff000, 0x496, 512 * 1024});
  ASSERT_EQ(sizeof(c), 40u);
  EXPECT_EQ(std::memcmp(&c, kCapturedRequest, sizeof(c)), 0);
}

TEST(RsocketWire, ImmediateDataAndScales) {
  EXPECT_EQ(wire::imm(wire::Op::data, 4096), 0x00001000u);
  EXPECT_EQ(wire::imm(wire::Op::sgl, 0x1ff), 0x800001ffu);
  EXPECT_EQ(wire::imm(wire::Op::ctrl, static_cast<uint32_t>(wire::Ctrl::shutdown)), 0xe0000002u);
  EXPECT_EQ(wire::imm_op(0xe0000000u), wire::Op::ctrl);
  EXPECT_EQ(wire::imm_data(0xffffffffu), 0x1fffffffu);
  EXPECT_EQ(wire::scale_of(100, 8), 100);
  EXPECT_EQ(wire::scale_of(512, 8), 128 | 2);
  EXPECT_EQ(wire::value_of(wire::scale_of(512, 8), 8), 512);
}

// What a peer of the other byte order (kConnFlagNet) finds in its target SGL
// and iomap table: every field reversed in place, offsets unchanged.
TEST(RsocketWire, AnSgeAndAnIomapEntryForAPeerOfTheOtherByteOrder) {
  wire::Sge sge{0x0102030405060708ull, 0x11223344u, 0x55667788u};
  wire::Sge swapped = wire::byteswapped(sge);
  const uint8_t expected[16] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
                                0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55};
  uint8_t native[16];
  std::memcpy(native, &swapped, sizeof(native));
  wire::Sge back = wire::byteswapped(swapped);
  if (__BYTE_ORDER == __LITTLE_ENDIAN) {
    // Stored big-endian: the bytes read as the values' big-endian form.
    const uint8_t be[16] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
    EXPECT_EQ(std::memcmp(native, be, 16), 0);
  } else {
    EXPECT_EQ(std::memcmp(native, expected, 16), 0);
  }
  EXPECT_EQ(back.addr, sge.addr);
  EXPECT_EQ(back.key, sge.key);
  EXPECT_EQ(back.length, sge.length);
  wire::IomapEntry e{0x1000, sge};
  wire::IomapEntry se = wire::byteswapped(e);
  EXPECT_EQ(se.offset, 0x0010000000000000ull);
  EXPECT_EQ(se.sge.addr, swapped.addr);
  EXPECT_EQ(se.sge.key, swapped.key);
  EXPECT_EQ(se.sge.length, swapped.length);
}

class RsocketTest : public CmTest {};

TEST_F(RsocketTest, UnsupportedDomainsTypesAndProtocols) {
  EXPECT_FAILS_WITH(::rsocket(AF_UNIX, SOCK_STREAM, 0), ENOTSUP);
  EXPECT_FAILS_WITH(::rsocket(AF_INET, SOCK_RAW, 0), ENOTSUP);
  EXPECT_FAILS_WITH(::rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), ENOTSUP);
  EXPECT_FAILS_WITH(::rsocket(AF_INET6, SOCK_DGRAM, IPPROTO_TCP), ENOTSUP);
}

TEST_F(RsocketTest, EveryCallRefusesAnFdThatIsNoRsocket) {
  int ordinary = eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(ordinary, 0);
  for (int fd : {-1, ordinary, 1 << 30}) {
    char buf[8];
    sockaddr_in a = ipv4("127.0.0.1", 1);
    socklen_t len = sizeof(a);
    int v = 1;
    EXPECT_FAILS_WITH(rbind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), EBADF);
    EXPECT_FAILS_WITH(rlisten(fd, 1), EBADF);
    EXPECT_FAILS_WITH(raccept(fd, nullptr, nullptr), EBADF);
    EXPECT_FAILS_WITH(rconnect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), EBADF);
    EXPECT_FAILS_WITH(rshutdown(fd, SHUT_RDWR), EBADF);
    EXPECT_FAILS_WITH(rrecv(fd, buf, sizeof(buf), 0), EBADF);
    EXPECT_FAILS_WITH(rsend(fd, buf, sizeof(buf), 0), EBADF);
    EXPECT_FAILS_WITH(rread(fd, buf, sizeof(buf)), EBADF);
    EXPECT_FAILS_WITH(rwrite(fd, buf, sizeof(buf)), EBADF);
    EXPECT_FAILS_WITH(rgetpeername(fd, reinterpret_cast<sockaddr*>(&a), &len), EBADF);
    EXPECT_FAILS_WITH(rgetsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), EBADF);
    EXPECT_FAILS_WITH(rsetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), EBADF);
    EXPECT_FAILS_WITH(rgetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &len), EBADF);
    EXPECT_FAILS_WITH(rfcntl(fd, F_GETFL), EBADF);
    EXPECT_FAILS_WITH(rclose(fd), EBADF);
  }
  close(ordinary);
}

TEST_F(RsocketTest, AStreamSocketBeforeItConnects) {
  int s = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0) << strerror(errno);
  char buf[8] = {};
  EXPECT_FAILS_WITH(rrecv(s, buf, sizeof(buf), 0), ENOTCONN);
  EXPECT_FAILS_WITH(rsend(s, buf, sizeof(buf), 0), ENOTCONN);
  EXPECT_FAILS_WITH(raccept(s, nullptr, nullptr), EINVAL);  // not listening: accept(2) (rdma-core 44: EBADF)
  EXPECT_FAILS_WITH(rconnect(s, nullptr, 16), EFAULT);
  EXPECT_FAILS_WITH(rshutdown(s, 42), EINVAL);
  EXPECT_EQ(rfcntl(s, F_GETFL), 0);
  EXPECT_EQ(rfcntl(s, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(rfcntl(s, F_GETFL), O_NONBLOCK);
  EXPECT_FAILS_WITH(rfcntl(s, F_GETFD), ENOTSUP);
  EXPECT_EQ(rclose(s), 0);
  EXPECT_FAILS_WITH(rclose(s), EBADF);
}

// Every send and receive call is the socket's sendmsg / recvmsg: a stream
// takes the buffers in turn, so a vector answers as the one-buffer calls do,
// except that empty buffers are skipped (a vector of nothing moves nothing).
TEST_F(RsocketTest, StreamVectorCallsBeforeItConnects) {
  int s = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0) << strerror(errno);
  char a[4] = {}, b[4] = {};
  iovec two[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
  iovec empty[2] = {{a, 0}, {nullptr, 0}};
  EXPECT_FAILS_WITH(rwritev(s, two, 2), ENOTCONN);
  EXPECT_FAILS_WITH(rreadv(s, two, 2), ENOTCONN);
  EXPECT_EQ(rwritev(s, empty, 2), 0);
  EXPECT_EQ(rreadv(s, empty, 2), 0);
  EXPECT_EQ(rwritev(s, two, 0), 0);
  EXPECT_FAILS_WITH(rwritev(s, two, -1), EINVAL);
  EXPECT_FAILS_WITH(rreadv(s, nullptr, 1), EINVAL);
  msghdr msg{};
  msg.msg_iov = two;
  msg.msg_iovlen = 2;
  EXPECT_FAILS_WITH(rsendmsg(s, &msg, 0), ENOTCONN);
  EXPECT_FAILS_WITH(rrecvmsg(s, &msg, 0), ENOTCONN);
  EXPECT_FAILS_WITH(rsendmsg(s, nullptr, 0), EFAULT);
  EXPECT_FAILS_WITH(rrecvmsg(s, nullptr, 0), EFAULT);
  int control = 0;
  msg.msg_control = &control;
  msg.msg_controllen = sizeof(control);
  EXPECT_FAILS_WITH(rsendmsg(s, &msg, 0), ENOTSUP);
  // A control buffer to receive into is taken (given back empty), as recvmsg(2).
  EXPECT_FAILS_WITH(rrecvmsg(s, &msg, 0), ENOTCONN);
  // No data: the source is left as it was.
  sockaddr_in from{};
  from.sin_port = 7;
  socklen_t len = sizeof(from);
  EXPECT_FAILS_WITH(rrecvfrom(s, a, sizeof(a), 0, reinterpret_cast<sockaddr*>(&from), &len),
                    ENOTCONN);
  EXPECT_EQ(len, sizeof(from));
  EXPECT_EQ(from.sin_port, 7);
  EXPECT_FAILS_WITH(rrecvfrom(s, a, sizeof(a), 0, nullptr, &len), ENOTCONN);
  sockaddr_in to = ipv4("127.0.0.1", 1);
  EXPECT_FAILS_WITH(rsendto(s, a, sizeof(a), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
                    ENOTCONN);
  EXPECT_EQ(rclose(s), 0);
}

TEST_F(RsocketTest, OptionsCheckTheirValues) {
  int s = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  int v = 1;
  socklen_t len = sizeof(v);
  EXPECT_FAILS_WITH(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, nullptr, sizeof(v)), EFAULT);
  EXPECT_FAILS_WITH(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, 1), EINVAL);
  EXPECT_FAILS_WITH(rsetsockopt(s, 12345, 1, &v, sizeof(v)), ENOTSUP);
  EXPECT_FAILS_WITH(rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, (v = 0, &v), sizeof(v)), EINVAL);
  v = 1;
  EXPECT_EQ(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)), 0);
  v = 0;
  EXPECT_EQ(rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(len, sizeof(int));
  // As the kernel's getsockopt: a short room takes the value's first bytes
  // (measured: 1 byte of SO_ERROR, TCP_NODELAY), a negative one is EINVAL.
  len = 1;
  v = 0x7f7f7f7f;
  EXPECT_EQ(rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(v, 0x7f7f7f01);
  len = static_cast<socklen_t>(-1);
  EXPECT_FAILS_WITH(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len), EINVAL);
  EXPECT_FAILS_WITH(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, nullptr), EFAULT);
  // Buffer sizes double, as the kernel's do (and rdma-core's).
  v = 8192;
  EXPECT_EQ(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
  len = sizeof(v);
  EXPECT_EQ(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
  EXPECT_EQ(v, 16384);
  v = 100;
  EXPECT_EQ(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)), 0);
  EXPECT_EQ(rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, &len), 0);
  EXPECT_EQ(v, 100);
  EXPECT_EQ(rclose(s), 0);
}

// What the kernel's TCP answers (measured) for a socket that is not
// connected, and for bad lengths and pointers; rdma-core 44 answers 0 to
// rgetpeername, rbind and rshutdown here, and crashes on the pointers.
TEST_F(RsocketTest, AnUnconnectedStreamAnswersAsTcp) {
  int s = ::rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0) << strerror(errno);
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  EXPECT_FAILS_WITH(rgetpeername(s, sa, &len), ENOTCONN);
  EXPECT_FAILS_WITH(rshutdown(s, SHUT_RDWR), ENOTCONN);
  EXPECT_FAILS_WITH(rshutdown(s, 42), EINVAL);
  // Bad pointers: EFAULT, never a crash.
  EXPECT_FAILS_WITH(rgetsockname(s, sa, reinterpret_cast<socklen_t*>(1)), EFAULT);
  EXPECT_FAILS_WITH(rgetsockname(s, reinterpret_cast<sockaddr*>(1), &len), EFAULT);
  EXPECT_FAILS_WITH(rgetsockname(s, nullptr, nullptr), EFAULT);
  int v;
  EXPECT_FAILS_WITH(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, reinterpret_cast<socklen_t*>(1)),
                    EFAULT);
  len = static_cast<socklen_t>(-1);
  EXPECT_FAILS_WITH(rgetsockname(s, sa, &len), EINVAL);
  // No room: only the size is told.
  len = 0;
  EXPECT_EQ(rgetsockname(s, nullptr, &len), 0) << strerror(errno);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  // An address shorter than its family's is EINVAL, none at all EFAULT.
  a = ipv4("127.0.0.1", 0);
  EXPECT_FAILS_WITH(rbind(s, sa, sizeof(a) - 1), EINVAL);
  EXPECT_FAILS_WITH(rbind(s, sa, 0), EINVAL);
  EXPECT_FAILS_WITH(rbind(s, nullptr, sizeof(a)), EFAULT);
  // Another family's address: EAFNOSUPPORT, as inet_bind (AF_UNSPEC with
  // INADDR_ANY is taken as AF_INET's); on an AF_INET6 socket, shorter than
  // RFC 2133's sockaddr_in6 (24) is EINVAL.
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  EXPECT_FAILS_WITH(rbind(s, reinterpret_cast<sockaddr*>(&a6), sizeof(a6)), EAFNOSUPPORT);
  EXPECT_EQ(rclose(s), 0);
  int s6 = ::rsocket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_GE(s6, 0);
  EXPECT_FAILS_WITH(rbind(s6, reinterpret_cast<sockaddr*>(&a6), 23), EINVAL);
  a = ipv4("127.0.0.1", 0);
  EXPECT_FAILS_WITH(rbind(s6, sa, sizeof(a6)), EAFNOSUPPORT);
  EXPECT_EQ(rclose(s6), 0);
}

// poll(2): more descriptors than RLIMIT_NOFILE is EINVAL, before any is
// looked at.
TEST_F(RsocketTest, PollOfMoreDescriptorsThanTheLimitIsInvalid) {
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  ASSERT_LT(rl.rlim_cur, 1u << 24) << "too many to make";
  std::vector<pollfd> fds(rl.rlim_cur + 1, pollfd{-1, 0, 0});
  EXPECT_FAILS_WITH(rpoll(fds.data(), fds.size(), 0), EINVAL);
  EXPECT_EQ(rpoll(fds.data(), fds.size() - 1, 0), 0) << strerror(errno);
  pollfd one{-1, 0, 0};
  EXPECT_FAILS_WITH(rpoll(&one, nfds_t{1} << 40, 0), EINVAL);
  EXPECT_FAILS_WITH(rpoll(&one, ~nfds_t{0}, 0), EINVAL);
}

TEST_F(RsocketTest, PollAndSelectTakeOrdinaryFdsAndRefuseBadArguments) {
  EXPECT_FAILS_WITH(rpoll(nullptr, 1, 0), EFAULT);
  EXPECT_FAILS_WITH(rselect(-1, nullptr, nullptr, nullptr, nullptr), EINVAL);
  int e = eventfd(1, EFD_CLOEXEC);  // readable
  pollfd p{e, POLLIN, 0};
  EXPECT_EQ(rpoll(&p, 1, 1000), 1);
  EXPECT_EQ(p.revents, POLLIN);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(e, &r);
  timeval tv{1, 0};
  EXPECT_EQ(rselect(e + 1, &r, nullptr, nullptr, &tv), 1);
  EXPECT_TRUE(FD_ISSET(e, &r));
  uint64_t c;
  ASSERT_EQ(read(e, &c, sizeof(c)), 8);
  p.revents = 0;
  EXPECT_EQ(rpoll(&p, 1, 50), 0);  // times out
  close(e);
}

}  // namespace
}  // namespace rdmacm::testing
