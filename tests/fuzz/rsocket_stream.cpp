// libFuzzer target: a connected stream rsocket's receive path, driven by a
// peer the input plays, over the unit tests' fake kernel and fake device.
//
// Each input connects one rsocket (sizes and the peer's connection data from
// the input: well formed, or any 40 bytes), makes it non-blocking, then runs
// a program of steps: the peer sends DATA as the protocol allows (into the
// space our credit updates granted it, within its credits), or any
// completion (status, flags, immediate data, length), writes any bytes into
// what it may write (our target SGL, our iomap table) or, breaking the
// protocol, into our receive buffer; grants us room to send and announces
// iomap entries; completes our sends (or fails one); and the application
// calls rrecv (any size, MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL), rsend, riomap,
// riounmap, riowrite, rpoll, rshutdown and rgetsockopt(SO_ERROR). Then the
// peer disconnects and the socket is closed.
//
// A finding, besides a crash or a sanitizer report: a hang (libFuzzer's
// -timeout, or any call taking over 3 s: the socket is non-blocking);
// rrecv handing out more bytes than the peer announced as DATA, or, while
// the peer kept to the protocol, bytes other than it wrote; an errno that
// no call of a stream socket documents; a receive window the library granted
// outside its receive buffer; and anything left behind after rclose (fds,
// kernel ids, QPs, CQs, channels, MRs, CQ events not acknowledged).
#include <arpa/inet.h>
#include <fcntl.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "fake_transport.h"
#include "fake_verbs.h"
#include "rsocket/protocol.h"

namespace {

namespace wire = rdmacm::rsocket::wire;
using namespace rdmacm::testing;

[[noreturn]] void failed(const char* what, int line) {
  std::fprintf(stderr, "rsocket_stream.cpp:%d: %s failed (errno %d)\n", line, what, errno);
  std::abort();
}
#define require(ok) ((ok) ? (void)0 : failed(#ok, __LINE__))

// RSOCKET_STREAM_TRACE=1 prints what an input does, to read a finding.
const bool tracing = std::getenv("RSOCKET_STREAM_TRACE") != nullptr;
#define trace(...) (tracing ? (void)std::fprintf(stderr, __VA_ARGS__) : (void)0)

// Eventfds open: the fake kernel's channels and the fake device's completion
// channels (libFuzzer opens and closes files of its own meanwhile).
size_t open_fds() {
  size_t n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    n += std::filesystem::read_symlink(e.path(), ec).native().starts_with("anon_inode:");
  return n;
}

// What a call of a stream socket may answer after anything a peer does:
// its own refusals, a connection that ended (EPROTO: the peer broke the
// protocol; ECONNRESET: a receive failed or the peer went; EIO: one of our
// sends failed; EPIPE: we or the peer shut it), and would-block.
bool documented(int err) {
  switch (err) {
    case EAGAIN:
    case EPROTO:
    case ECONNRESET:
    case EIO:
    case EPIPE:
    case ENOTCONN:
      return true;
  }
  return false;
}

// A call on a non-blocking socket answers at once.
struct Timed {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~Timed() {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(3))
      failed("a call on a non-blocking socket returning within 3 s", __LINE__);
  }
};

constexpr uint64_t kPeerSgl = 0x7000'0000'0000;  // the peer's target SGL (never dereferenced)
constexpr uint32_t kPeerKey = 0xAAAA;

// The peer, as an rsocket peer keeping to the protocol sees our side.
struct Peer {
  ibv_qp* qp = nullptr;
  wire::PeerConnData ours{};  // what our rconnect sent
  bool swap = false;          // it said it is of the other byte order
  bool model = true;          // its connection data was well formed (its target SGL known)
  wire::Sge targets[wire::kTargetSglSize]{};  // where it may write DATA next
  unsigned target = 0;
  uint16_t sent = 0, granted = 0;  // DATA and IOMAP_SGL messages / our grant
  bool strict = true;              // it kept to the protocol: rrecv must give its bytes
  std::deque<uint8_t> expected;    // what it wrote as DATA, not read yet (strict)
  bool clean = true;  // nothing ended the connection: everything it wrote is read in the end
  uint64_t announced = 0, consumed = 0;  // DATA bytes announced / read

  // Our posted messages, as they land: credits and receive windows.
  void read_ours() {
    for (const FakeSend& s : fake_take_posted(qp)) {
      if (s.opcode != IBV_WR_RDMA_WRITE_WITH_IMM || wire::imm_op(s.imm) != wire::Op::sgl) continue;
      granted = static_cast<uint16_t>(wire::imm_data(s.imm));
      if (!model || s.data.size() != sizeof(wire::Sge) || s.remote_addr < kPeerSgl) continue;
      uint64_t entry = (s.remote_addr - kPeerSgl) / sizeof(wire::Sge);
      require(s.remote_addr == kPeerSgl + entry * sizeof(wire::Sge) && entry < wire::kTargetSglSize);
      require(s.rkey == kPeerKey);
      wire::Sge sge;
      std::memcpy(&sge, s.data.data(), sizeof(sge));
      targets[entry] = swap ? wire::byteswapped(sge) : sge;
      trace("  window %lu: %u bytes\n", entry, targets[entry].length);
    }
  }

  bool receive(uint32_t status, uint32_t flags, uint32_t imm, uint32_t byte_len) {
    ibv_wc wc{};
    wc.status = static_cast<ibv_wc_status>(status);
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.wc_flags = flags;
    wc.imm_data = htobe32(imm);
    wc.byte_len = byte_len;
    return fake_receive(qp, wc);
  }

  // DATA as the protocol allows: within credits and the window granted.
  void send_data(FuzzedDataProvider& in) {
    wire::Sge& t = targets[target];
    size_t want = in.ConsumeIntegralInRange<size_t>(1, 4096);
    if (sent == granted || !t.length || !fake_posted_recvs(qp)) return;
    uint32_t n = static_cast<uint32_t>(std::min<size_t>(want, t.length));
    std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(n);
    for (size_t i = bytes.size(); i < n; ++i) bytes.push_back(static_cast<uint8_t>(announced + i));
    // The window is ours: the library granted it inside its receive buffer.
    require(fake_remote_write(t.key, t.addr, bytes.data(), n));
    require(receive(IBV_WC_SUCCESS, IBV_WC_WITH_IMM, wire::imm(wire::Op::data, n), 0));
    trace("  DATA %u\n", n);
    ++sent;
    announced += n;
    expected.insert(expected.end(), bytes.begin(), bytes.end());
    t.addr += n;
    t.length -= n;
    if (!t.length) target = (target + 1) % wire::kTargetSglSize;
  }

  // Any completion: status, flags, immediate data and length from the input.
  void send_any(FuzzedDataProvider& in) {
    uint32_t status = in.ConsumeBool() ? IBV_WC_SUCCESS : in.ConsumeIntegralInRange(0, 23);
    uint32_t flags = in.ConsumeBool() ? IBV_WC_WITH_IMM : in.ConsumeIntegral<uint8_t>();
    uint32_t imm = in.ConsumeBool()
                       ? wire::imm(static_cast<wire::Op>(in.ConsumeIntegralInRange(0, 7)),
                                   in.ConsumeIntegralInRange<uint32_t>(0, 70000))
                       : in.ConsumeIntegral<uint32_t>();
    uint32_t byte_len = in.ConsumeIntegral<uint32_t>();
    if (!receive(status, flags, imm, byte_len)) return;
    clean = false;
    trace("  completion status %u flags %#x op %u data %u\n", status, flags,
          static_cast<unsigned>(wire::imm_op(imm)), wire::imm_data(imm));
    if (status != IBV_WC_SUCCESS || !(flags & IBV_WC_WITH_IMM)) return;  // the connection ends
    wire::Op op = wire::imm_op(imm);
    if (op == wire::Op::data) {
      announced += wire::imm_data(imm);
      strict = false;  // bytes it did not write, or past its window
    }
    if (op == wire::Op::data || op == wire::Op::iomap_sgl) ++sent;
  }

  // Bytes written where the peer may write: our target SGL and iomap table
  // (any contents: they describe the peer's own buffers), or, breaking the
  // protocol, our receive buffer.
  void write_any(FuzzedDataProvider& in) {
    bool rbuf = in.ConsumeBool() && in.ConsumeBool();
    const wire::Sge& region = rbuf ? ours.data_buf : ours.target_sgl;
    uint64_t len = rbuf ? 2ull * region.length
                        : (sizeof(wire::Sge) * wire::kTargetSglSize +
                           sizeof(wire::IomapEntry) * ours.iomap.length);
    uint64_t off = in.ConsumeIntegralInRange<uint64_t>(0, len);
    std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange(0, 64));
    size_t n = std::min<uint64_t>(bytes.size(), len - off);
    require(fake_remote_write(region.key, region.addr + off, bytes.data(), n));
    trace("  wrote %zu bytes at %lu of our %s\n", n, off, rbuf ? "receive buffer" : "target SGL");
    if (rbuf && n) strict = false;
  }

  // Room for our sends: an SGE into our target SGL and a credit update. A
  // peer writes in our byte order (it swaps, when it said it is of the other).
  void grant(FuzzedDataProvider& in) {
    unsigned entry = in.ConsumeIntegralInRange(0u, wire::kTargetSglSize - 1);
    wire::Sge sge{0x5000'0000'0000 + in.ConsumeIntegral<uint16_t>() * 0x10000ull, 0xBBBB,
                  in.ConsumeBool() ? 65536u : in.ConsumeIntegral<uint32_t>()};
    uint32_t credits = in.ConsumeIntegral<uint16_t>();
    require(fake_remote_write(ours.target_sgl.key, ours.target_sgl.addr + entry * sizeof(sge), &sge,
                              sizeof(sge)));
    receive(IBV_WC_SUCCESS, IBV_WC_WITH_IMM, wire::imm(wire::Op::sgl, credits), 0);
    trace("  grant entry %u, credits %u\n", entry, credits);
  }

  // An iomap entry announced: written into our table, then IOMAP_SGL.
  void announce_iomap(FuzzedDataProvider& in) {
    uint32_t index = in.ConsumeIntegralInRange<uint32_t>(0, ours.iomap.length + 1);
    if (index >= ours.iomap.length || sent == granted) clean = false;
    wire::IomapEntry e{in.ConsumeIntegral<uint16_t>() * 4096ull,
                       {0x4000'0000'0000, 0xCCCC, in.ConsumeIntegralInRange<uint32_t>(0, 1 << 20)}};
    if (index < ours.iomap.length)
      require(fake_remote_write(ours.target_sgl.key,
                                ours.iomap.addr + index * sizeof(e), &e, sizeof(e)));
    if (receive(IBV_WC_SUCCESS, IBV_WC_WITH_IMM, wire::imm(wire::Op::iomap_sgl, index), 0)) ++sent;
    trace("  iomap entry %u\n", index);
  }

  // What rrecv handed out (n bytes, not consumed if peeking).
  void check_read(const uint8_t* buf, size_t n, bool peek) {
    if (strict) {
      require(n <= expected.size());
      require(std::equal(buf, buf + n, expected.begin()));
      if (!peek) expected.erase(expected.begin(), expected.begin() + static_cast<long>(n));
    }
    if (!peek) consumed += n;
    require(consumed <= announced);
  }
};

std::vector<uint8_t> peer_conn_data(FuzzedDataProvider& in, Peer* peer) {
  if (in.ConsumeIntegralInRange(0, 7) == 0) {
    peer->model = peer->strict = false;
    return in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange(0, 56));
  }
  wire::ConnData c{};
  c.version = wire::kVersion;
  peer->swap = in.ConsumeBool();
  c.flags = static_cast<uint8_t>((peer->swap == (__BYTE_ORDER == __LITTLE_ENDIAN) ? wire::kConnFlagNet : 0) |
                                 (in.ConsumeBool() ? wire::kConnFlagIomap : 0));
  c.credits = htobe16(in.ConsumeIntegral<uint16_t>());
  c.target_iomap_size = in.ConsumeIntegral<uint8_t>();
  c.target_sgl = wire::sge_to_wire({kPeerSgl, kPeerKey, wire::kTargetSglSize});
  c.data_buf = wire::sge_to_wire({0x6000'0000'0000, 0xDDDD, in.ConsumeIntegral<uint32_t>()});
  auto* p = reinterpret_cast<uint8_t*>(&c);
  return {p, p + sizeof(c)};
}

void set_sizes(FuzzedDataProvider& in, int fd) {
  // Small buffers first (the defaults, 0, are large: slow to make, and they
  // wrap rarely).
  static const int kBufs[] = {4096, 1, 1024, 8192, 65536, 0};
  static const int kQueues[] = {16, 0, 1, 17, 32, 64};
  static const int kInline[] = {-1, 0, 15, 16, 64};
  int v;
  if ((v = in.PickValueInArray(kBufs))) rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
  if ((v = in.PickValueInArray(kBufs))) rsetsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  if ((v = in.PickValueInArray(kQueues))) rsetsockopt(fd, SOL_RDMA, RDMA_RQSIZE, &v, sizeof(v));
  if ((v = in.PickValueInArray(kQueues))) rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v));
  if ((v = in.PickValueInArray(kInline)) >= 0) rsetsockopt(fd, SOL_RDMA, RDMA_INLINE, &v, sizeof(v));
  if ((v = in.ConsumeIntegralInRange(-1, 40)) >= 0)
    rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof(v));
}

// Buffers the application maps for the peer (riomap) and writes from.
struct Maps {
  static constexpr int kCount = 3;
  alignas(64) uint8_t buf[kCount][8192];
  size_t len[kCount] = {};
};

// What a connection nothing ended still holds: every byte the peer wrote.
void drain(int fd, Peer& peer) {
  static std::vector<uint8_t> buf(1 << 17);
  for (int i = 0; i < 64; ++i) {
    ssize_t n = rrecv(fd, buf.data(), buf.size(), 0);
    trace("rrecv(all) = %zd (errno %d)\n", n, n < 0 ? errno : 0);
    if (n <= 0) {
      require(n < 0 && errno == EAGAIN);
      break;
    }
    peer.check_read(buf.data(), static_cast<size_t>(n), false);
  }
  require(peer.expected.empty());
}

void run(FuzzedDataProvider& in, int fd, Peer& peer) {
  Maps maps;
  static std::vector<uint8_t> out(1 << 17);
  for (int steps = 0; steps < 256 && in.remaining_bytes(); ++steps) {
    peer.read_ours();
    switch (in.ConsumeIntegralInRange(0, 15)) {
      case 0:
      case 1:
      case 2:
        peer.send_data(in);
        break;
      case 3:
        peer.send_any(in);
        break;
      case 4:
        peer.write_any(in);
        break;
      case 5:
        peer.grant(in);
        break;
      case 6:
        peer.announce_iomap(in);
        break;
      case 7: {  // our sends complete, or one fails
        if (in.ConsumeIntegralInRange(0, 7) == 0) {
          auto status = static_cast<ibv_wc_status>(in.ConsumeIntegralInRange(1, 21));
          trace("  a send fails (%d)\n", status);
          if (fake_complete_send(peer.qp, status)) peer.clean = false;
        } else {
          int n = in.ConsumeIntegralInRange(1, 64);
          while (n-- && fake_complete_send(peer.qp, IBV_WC_SUCCESS)) {
          }
        }
        if (in.ConsumeIntegralInRange(0, 7) == 0) fake_auto_complete(peer.qp, in.ConsumeBool());
        break;
      }
      case 8:
      case 9:
      case 10: {
        static const int kFlags[] = {0, MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_PEEK | MSG_WAITALL};
        int flags = in.PickValueInArray(kFlags);
        size_t len = in.ConsumeBool() ? in.ConsumeIntegralInRange(0, 64)
                                      : in.ConsumeIntegralInRange(0, 1 << 17);
        std::unique_ptr<uint8_t[]> buf(new uint8_t[len]);  // exactly len: ASan sees past it
        errno = 0;
        ssize_t n;
        {
          Timed t;
          n = rrecv(fd, buf.get(), len, flags);
        }
        trace("rrecv(%zu, %#x) = %zd (errno %d)\n", len, flags, n, n < 0 ? errno : 0);
        if (n < 0) {
          require(documented(errno));
          if (errno != EAGAIN) peer.clean = false;
        } else {
          require(static_cast<size_t>(n) <= len);
          peer.check_read(buf.get(), static_cast<size_t>(n), flags & MSG_PEEK);
        }
        break;
      }
      case 11: {
        size_t len = in.ConsumeIntegralInRange(0, 1 << 17);
        errno = 0;
        ssize_t n;
        {
          Timed t;
          n = rsend(fd, out.data(), len, in.ConsumeBool() ? MSG_DONTWAIT : 0);
        }
        trace("rsend(%zu) = %zd (errno %d)\n", len, n, n < 0 ? errno : 0);
        require(n < 0 ? documented(errno) : static_cast<size_t>(n) <= len);
        if (n < 0 && errno != EAGAIN) peer.clean = false;
        break;
      }
      case 12: {  // riomap, riounmap
        int i = in.ConsumeIntegralInRange(0, Maps::kCount - 1);
        if (maps.len[i]) {
          require(riounmap(fd, maps.buf[i], maps.len[i]) == 0);
          maps.len[i] = 0;
          break;
        }
        size_t len = in.ConsumeIntegralInRange<size_t>(1, sizeof(maps.buf[i]));
        int prot = in.ConsumeBool() ? PROT_WRITE : in.ConsumeIntegral<uint8_t>();
        off_t offset = in.ConsumeBool() ? -1 : in.ConsumeIntegral<uint16_t>() * 4096l;
        off_t r = riomap(fd, maps.buf[i], len, prot, 0, offset);
        trace("riomap(%zu, %#x, %ld) = %ld (errno %d)\n", len, prot, offset, r, errno);
        if (r >= 0)
          maps.len[i] = len;
        else
          require(errno == EINVAL || errno == ENOMEM);
        break;
      }
      case 13: {
        size_t len = in.ConsumeIntegralInRange(0, 1 << 16);
        off_t offset = in.ConsumeIntegral<uint16_t>() * 4096l + in.ConsumeIntegral<uint8_t>();
        errno = 0;
        ssize_t n;
        {
          Timed t;
          n = riowrite(fd, out.data(), len, offset, in.ConsumeBool() ? MSG_DONTWAIT : 0);
        }
        trace("riowrite(%zu, %ld) = %zd (errno %d)\n", len, offset, n, n < 0 ? errno : 0);
        require(n < 0 ? documented(errno) : static_cast<size_t>(n) <= len);
        break;
      }
      case 14: {
        pollfd p{fd, static_cast<short>(in.ConsumeIntegral<uint16_t>() & (POLLIN | POLLOUT | POLLRDHUP | POLLPRI)), 0};
        int r;
        {
          Timed t;
          r = rpoll(&p, 1, 0);
        }
        trace("rpoll(%#x) = %d, %#x\n", p.events, r, p.revents);
        require(r == 0 || r == 1);
        break;
      }
      case 15: {
        if (in.ConsumeBool()) {
          int err = -1;
          socklen_t len = sizeof(err);
          require(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
          trace("SO_ERROR %d\n", err);
          require(err == 0 || documented(err));
          break;
        }
        // rshutdown waits (a bounded time) for our sends to complete: the
        // peer completes them meanwhile.
        int how = in.ConsumeIntegralInRange(0, 3);
        peer.clean = false;
        fake_auto_complete(peer.qp, true);
        while (fake_complete_send(peer.qp, IBV_WC_SUCCESS)) {
        }
        int r;
        {
          Timed t;
          r = rshutdown(fd, how);
        }
        trace("rshutdown(%d) = %d (errno %d)\n", how, r, errno);
        require(r == 0 || (how == 3 && errno == EINVAL));
        fake_auto_complete(peer.qp, false);
        break;
      }
    }
  }
}

size_t baseline_fds = 0;

}  // namespace

// The library opens the device and its own fds once, on first use: the
// lingerer's too (a socket closed while connected), and the state-change
// broadcast's (rpoll's sleep; the connection service, which watches every
// connection, announces a disconnect on it).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  {
    FakeTransport fake;
    answer_at_once(fake);
    wire::ConnData c{};
    c.version = wire::kVersion;
    auto* p = reinterpret_cast<uint8_t*>(&c);
    fake.reply(Cmd::connect, RDMA_CM_EVENT_CONNECT_RESPONSE, {p, p + sizeof(c)});
    int fd = rsocket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(0x0A000002);
    require(rconnect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0);
    ibv_qp* qp = fake_last_qp();
    fake_auto_complete(qp, true);
    pollfd pfd{fd, POLLIN, 0};
    require(rpoll(&pfd, 1, 1) == 0);  // rpoll's sleep: the state-change broadcast's fd
    rclose(fd);
    // Then the peer closes its end: the lingerer finishes at its next look
    // (not after its 2 s).
    ibv_wc wc{};
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = htobe32(wire::imm(wire::Op::ctrl, static_cast<uint32_t>(wire::Ctrl::disconnect)));
    if (fake_verbs_objects()) fake_receive(qp, wc);
    // The lingerer deletes the socket on its thread: its id is the last to go.
    while (fake_verbs_objects() || fake.live_ids())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // out of the fake's call
  }
  baseline_fds = open_fds();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  {
    FakeTransport fake;
    answer_at_once(fake);
    Peer peer;
    fake.reply(Cmd::connect, RDMA_CM_EVENT_CONNECT_RESPONSE, peer_conn_data(in, &peer));
    int fd = rsocket(AF_INET, SOCK_STREAM, 0);
    require(fd >= 0);
    set_sizes(in, fd);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(7471);
    to.sin_addr.s_addr = htonl(0x0A000002);
    int r = rconnect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    trace("rconnect = %d (errno %d)\n", r, r ? errno : 0);
    if (r == 0) {
      require(rfcntl(fd, F_SETFL, O_NONBLOCK) == 0);
      peer.qp = fake_last_qp();
      trace("qp %p, private data %u\n", static_cast<void*>(peer.qp), fake.last_connect.private_data_len);
      require(peer.qp && fake.last_connect.private_data_len >= sizeof(wire::ConnData));
      wire::ConnData ours;
      std::memcpy(&ours, fake.last_connect.private_data, sizeof(ours));
      peer.ours = wire::decode_conn_data(ours);
      peer.granted = peer.ours.credits;
      peer.targets[0] = peer.ours.data_buf;
      run(in, fd, peer);
      if (peer.strict && peer.clean) drain(fd, peer);
      // The peer completes what we sent and disconnects.
      fake_auto_complete(peer.qp, true);
      while (fake_complete_send(peer.qp, IBV_WC_SUCCESS)) {
      }
      // Taken first (the library reposts a receive for each message), so that
      // a receive is posted for the disconnect: else the close would linger.
      pollfd p{fd, POLLIN, 0};
      require(rpoll(&p, 1, 0) >= 0);
      peer.receive(IBV_WC_SUCCESS, IBV_WC_WITH_IMM,
                   wire::imm(wire::Op::ctrl, static_cast<uint32_t>(wire::Ctrl::disconnect)), 0);
      require(rpoll(&p, 1, 0) >= 0);
    } else {
      require(errno == ENOTSUP || errno == ENOMEM);
    }
    require(rclose(fd) == 0);
    // A close the peer has not answered lingers in the background (at most
    // 2 s): then wait for it, and for its thread to be out of the fake kernel.
    if (fake_verbs_objects() || fake.live_ids()) {
      trace("lingering\n");
      // The bound is the linger's (2 s) with room for a loaded host; the
      // checks below still fail a close that never ends.
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(8);
      while ((fake_verbs_objects() || fake.live_ids()) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    require(fake_verbs_objects() == 0);
    require(fake.live_ids() == 0);
    require(fake_cq_event_faults() == 0);
  }
  // The lingerer's thread closes a socket's last fd after its id is gone
  // (the warm-up's too): a count lower than the baseline is the new one, a
  // higher one must come down soon (within 8 s, for a loaded host).
  size_t fds = open_fds();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (fds > baseline_fds && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fds = open_fds();
  }
  require(fds <= baseline_fds);
  baseline_fds = fds;
  return 0;
}
