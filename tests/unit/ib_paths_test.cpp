// The InfiniBand-only paths, which no machine here can run (Soft-RoCE and
// Soft-iWARP have no SA and no AF_IB), against the fake kernel and the fake
// InfiniBand device:
// - path records from the SA: the kernel's ibv_path_data as the id's
//   route.path_rec after ROUTE_RESOLVED and on a connection request,
//   converted field by field as rdma-core 44's ucma_convert_path does;
//   rdma_set_option(RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) handing records to
//   the kernel, and rdma_create_ep setting an rdma_addrinfo's ai_route that
//   way instead of resolving the route;
// - the AF_IB connection header: the library prepends to the private data
//   only what an rdma_addrinfo's ai_connect holds (rdma-core's ibacm path
//   builds a 36-byte ib_connect_hdr there for IP addresses turned into
//   AF_IB), nothing otherwise: the CM header of AF_INET/AF_INET6 over IB is
//   the kernel's to add, and AF_IB has none; rsocket streams over AF_IB put
//   their connection data after room for that 36-byte header (rdma-core
//   44's rs_conn_data_offset), over AF_INET at the start.
#include <endian.h>
#include <infiniband/ib.h>
#include <infiniband/sa.h>

#include <poll.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "device_fixture.h"
#include "rsocket/protocol.h"

namespace rdmacm::testing {
namespace {

// Two records as an SA answers them: the primary path, both directions,
// and an alternate one.
std::vector<ibv_path_data> sa_answer() {
  std::vector<ibv_path_data> v(2);
  for (size_t i = 0; i < v.size(); ++i) {
    ibv_path_data& d = v[i];
    d = {};
    d.flags = i == 0 ? IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL
                     : IBV_PATH_FLAG_ALTERNATE | IBV_PATH_FLAG_OUTBOUND;
    ibv_path_record& p = d.path;
    p.service_id = htobe64(0x0106000000004e20 + i);
    for (int b = 0; b < 16; ++b) {
      p.dgid.raw[b] = static_cast<uint8_t>(0xd0 + b + i);
      p.sgid.raw[b] = static_cast<uint8_t>(0x50 + b + i);
    }
    p.dlid = htobe16(static_cast<uint16_t>(0x12 + i));
    p.slid = htobe16(static_cast<uint16_t>(0x34 + i));
    p.flowlabel_hoplimit = htobe32(0x0ABCDE00u << 0 | 0x40);  // flow label 0xABCDE, hop limit 64
    p.tclass = 0x28;
    p.reversible_numpath = static_cast<uint8_t>(0x80 | 1);
    p.pkey = htobe16(0xFFFF);
    p.qosclass_sl = htobe16(static_cast<uint16_t>(0x1230 | (3 + i)));
    p.mtu = static_cast<uint8_t>(2 << 6 | IBV_MTU_2048);
    p.rate = static_cast<uint8_t>(2 << 6 | 7);
    p.packetlifetime = static_cast<uint8_t>(2 << 6 | 18);
    p.preference = 0;
  }
  return v;
}

// rdma-core 44's ucma_convert_path, field by field.
void expect_converted(const ibv_sa_path_rec& r, const ibv_path_data& d) {
  const ibv_path_record& p = d.path;
  EXPECT_EQ(std::memcmp(&r.dgid, &p.dgid, sizeof(r.dgid)), 0);
  EXPECT_EQ(std::memcmp(&r.sgid, &p.sgid, sizeof(r.sgid)), 0);
  EXPECT_EQ(r.dlid, p.dlid);  // both big-endian
  EXPECT_EQ(r.slid, p.slid);
  EXPECT_EQ(r.raw_traffic, 0);
  EXPECT_EQ(be32toh(r.flow_label), 0xABCDEu);
  EXPECT_EQ(r.hop_limit, 0x40);
  EXPECT_EQ(r.traffic_class, 0x28);
  EXPECT_EQ(r.reversible, 1);
  EXPECT_EQ(r.numb_path, 1);
  EXPECT_EQ(r.pkey, p.pkey);
  EXPECT_EQ(r.sl, be16toh(p.qosclass_sl) & 0xF);
  EXPECT_EQ(r.mtu_selector, 2);
  EXPECT_EQ(r.mtu, IBV_MTU_2048);
  EXPECT_EQ(r.rate_selector, 2);
  EXPECT_EQ(r.rate, 7);
  EXPECT_EQ(r.packet_life_time_selector, 2);
  EXPECT_EQ(r.packet_life_time, 18);
  EXPECT_EQ(r.preference, static_cast<uint8_t>(d.flags));
}

// An active endpoint's rdma_addrinfo for an RC connection to dst.
rdma_addrinfo active_rc(sockaddr* dst, socklen_t len) {
  rdma_addrinfo res{};
  res.ai_family = dst->sa_family;
  res.ai_qp_type = IBV_QPT_RC;
  res.ai_port_space = RDMA_PS_TCP;
  res.ai_dst_addr = dst;
  res.ai_dst_len = len;
  return res;
}

class IbPaths : public DeviceTest {};

TEST_F(IbPaths, RouteResolvedCarriesTheSaPathRecords) {
  fake.paths = sa_answer();
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(routed(channel, false, &id));
  ASSERT_EQ(id->route.num_paths, 2);
  ASSERT_NE(id->route.path_rec, nullptr);
  expect_converted(id->route.path_rec[0], fake.paths[0]);
  expect_converted(id->route.path_rec[1], fake.paths[1]);
  // A second resolution with fewer records: the route holds what the kernel
  // has now.
  fake.paths.resize(1);
  ASSERT_EQ(rdma_resolve_route(id, 100), 0);
  ASSERT_NO_FATAL_FAILURE(expect_event(channel, id, RDMA_CM_EVENT_ROUTE_RESOLVED));
  ASSERT_EQ(id->route.num_paths, 1);
  expect_converted(id->route.path_rec[0], fake.paths[0]);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(IbPaths, AConnectionRequestCarriesItsPathRecords) {
  fake.paths = sa_answer();
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &listener, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in any = ipv4("0.0.0.0", 7471);
  ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&any)), 0);
  ASSERT_EQ(rdma_listen(listener, 4), 0);
  fake.queue_request(channel->fd, uid(listener));
  rdma_cm_event* ev = next(channel);
  ASSERT_NE(ev, nullptr);
  ASSERT_EQ(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST) << rdma_event_str(ev->event);
  rdma_cm_id* conn = ev->id;
  ASSERT_EQ(conn->route.num_paths, 2);
  expect_converted(conn->route.path_rec[0], fake.paths[0]);
  expect_converted(conn->route.path_rec[1], fake.paths[1]);
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  EXPECT_EQ(rdma_reject(conn, nullptr, 0), 0);
  EXPECT_EQ(rdma_destroy_id(conn), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
}

// RDMA_OPTION_IB_PATH: the records reach the kernel as given; the kernel
// answers ROUTE_RESOLVED and the route holds what it then reports.
TEST_F(IbPaths, SetIbPathHandsTheRecordsToTheKernel) {
  fake.reply(Cmd::set_option, RDMA_CM_EVENT_ROUTE_RESOLVED);
  std::vector<ibv_path_data> records = sa_answer();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in peer = ipv4("10.0.0.2", 7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&peer), 100), 0);
  ASSERT_NO_FATAL_FAILURE(expect_event(channel, id, RDMA_CM_EVENT_ADDR_RESOLVED));
  fake.paths = records;
  ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, records.data(),
                            records.size() * sizeof(records[0])),
            0)
      << strerror(errno);
  EXPECT_EQ(fake.last_option.level, RDMA_OPTION_IB);
  EXPECT_EQ(fake.last_option.name, RDMA_OPTION_IB_PATH);
  ASSERT_EQ(fake.last_option.value.size(), records.size() * sizeof(records[0]));
  EXPECT_EQ(std::memcmp(fake.last_option.value.data(), records.data(), fake.last_option.value.size()),
            0);
  ASSERT_NO_FATAL_FAILURE(expect_event(channel, id, RDMA_CM_EVENT_ROUTE_RESOLVED));
  ASSERT_EQ(id->route.num_paths, 2);
  expect_converted(id->route.path_rec[0], records[0]);
  // As rdma-core: no value is EFAULT (the kernel's answer), no length EINVAL.
  EXPECT_FAILS_WITH(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, nullptr, 8), EFAULT);
  EXPECT_FAILS_WITH(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, records.data(), 0),
                    EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// An rdma_addrinfo with a route (ai_route: what ibacm answers) is set with
// RDMA_OPTION_IB_PATH instead of resolving the route, as rdma-core 44's
// rdma_create_ep does.
TEST_F(IbPaths, CreateEpSetsTheAddrinfoRouteInsteadOfResolving) {
  fake.reply(Cmd::set_option, RDMA_CM_EVENT_ROUTE_RESOLVED);
  std::vector<ibv_path_data> records = sa_answer();
  fake.paths = records;
  sockaddr_in peer = ipv4("10.0.0.2", 7471);
  rdma_addrinfo res = active_rc(reinterpret_cast<sockaddr*>(&peer), sizeof(peer));
  res.ai_route = records.data();
  res.ai_route_len = records.size() * sizeof(records[0]);
  size_t start = fake.commands().size();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_ep(&id, &res, nullptr, nullptr), 0) << strerror(errno);
  std::vector<Cmd> cmds = commands_since(start);
  EXPECT_NE(std::find(cmds.begin(), cmds.end(), Cmd::set_option), cmds.end());
  EXPECT_EQ(std::find(cmds.begin(), cmds.end(), Cmd::resolve_route), cmds.end());
  EXPECT_EQ(fake.last_option.name, RDMA_OPTION_IB_PATH);
  EXPECT_EQ(fake.last_option.value.size(), res.ai_route_len);
  ASSERT_EQ(id->route.num_paths, 2);
  expect_converted(id->route.path_rec[1], records[1]);
  rdma_destroy_ep(id);
}

// rdma-core's ib_connect_hdr (cma.h): what its ibacm path puts in ai_connect
// for an IP address turned into AF_IB, so that the passive side finds the
// CM header the kernel would have written for an IP connection.
struct IbConnectHdr {
  uint8_t cma_version;
  uint8_t ip_version;  // 7:4
  uint16_t port;
  uint32_t src_addr[4];
  uint32_t dst_addr[4];
};
static_assert(sizeof(IbConnectHdr) == 36);

class AfIbHeader : public DeviceTest {
 protected:
  // An endpoint made from res, moved to the test's channel so that
  // rdma_connect returns once the kernel has the command.
  void endpoint(rdma_addrinfo& res, rdma_cm_id** out) {
    ASSERT_EQ(rdma_create_ep(out, &res, nullptr, nullptr), 0) << strerror(errno);
    ASSERT_EQ(rdma_migrate_id(*out, channel), 0) << strerror(errno);
  }
  // What the kernel got from rdma_connect with these 8 bytes of the
  // application's private data.
  std::vector<uint8_t> connect_with_user_data(rdma_cm_id* id) {
    rdma_conn_param param{};
    param.private_data = kUser;
    param.private_data_len = sizeof(kUser);
    EXPECT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
    const ucma_abi_conn_param& c = fake.last_connect;
    return {c.private_data, c.private_data + c.private_data_len};
  }
  static constexpr uint8_t kUser[8] = {1, 2, 3, 4, 5, 6, 7, 8};
};

TEST_F(AfIbHeader, AddrinfoConnectDataGoesFirstOnAfIb) {
  IbConnectHdr hdr{};
  hdr.ip_version = 4 << 4;
  hdr.src_addr[3] = htobe32(0x0a000001);
  hdr.dst_addr[3] = htobe32(0x0a000002);
  sockaddr_ib dst{};
  dst.sib_family = AF_IB;
  dst.sib_pkey = htobe16(0xFFFF);
  dst.sib_sid = htobe64(0x0000000001064e20ull);  // RDMA_PS_TCP, port 20000
  dst.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
  rdma_addrinfo res = active_rc(reinterpret_cast<sockaddr*>(&dst), sizeof(dst));
  res.ai_connect = &hdr;
  res.ai_connect_len = sizeof(hdr);
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(endpoint(res, &id));
  std::vector<uint8_t> sent = connect_with_user_data(id);
  ASSERT_EQ(sent.size(), sizeof(hdr) + sizeof(kUser));
  EXPECT_EQ(std::memcmp(sent.data(), &hdr, sizeof(hdr)), 0) << "the header first";
  EXPECT_EQ(std::memcmp(sent.data() + sizeof(hdr), kUser, sizeof(kUser)), 0) << "then the application's";
  rdma_destroy_ep(id);
}

// No ai_connect: the library prepends nothing, on AF_IB as on AF_INET (where
// the kernel writes the CM header itself, after the library's bytes).
TEST_F(AfIbHeader, NothingPrependedWithoutAddrinfoConnectData) {
  sockaddr_in peer = ipv4("10.0.0.2", 7471);
  sockaddr_ib dst{};
  dst.sib_family = AF_IB;
  dst.sib_pkey = htobe16(0xFFFF);
  dst.sib_sid = htobe64(0x0000000001061d2full);
  for (sockaddr* to : {reinterpret_cast<sockaddr*>(&peer), reinterpret_cast<sockaddr*>(&dst)}) {
    SCOPED_TRACE(to->sa_family == AF_IB ? "AF_IB" : "AF_INET");
    rdma_addrinfo res = active_rc(to, to->sa_family == AF_IB ? sizeof(dst) : sizeof(peer));
    rdma_cm_id* id = nullptr;
    ASSERT_NO_FATAL_FAILURE(endpoint(res, &id));
    std::vector<uint8_t> sent = connect_with_user_data(id);
    EXPECT_EQ(sent, std::vector<uint8_t>(kUser, kUser + sizeof(kUser)));
    rdma_destroy_ep(id);
  }
}

// An rsocket stream's connection data in the kernel's connect command: after
// 36 bytes left for the IB connection header on AF_IB, at the start on
// AF_INET, as rdma-core 44's rs_do_connect lays it out.
class RsocketAfIb : public DeviceTest {
 protected:
  // The private data of the connect a non-blocking rconnect from src to dst
  // hands the kernel (driven by rpoll; nothing answers the connect).
  std::vector<uint8_t> connect_data(const sockaddr* src, const sockaddr* dst, socklen_t len) {
    int fd = ::rsocket(src->sa_family, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0) << strerror(errno);
    if (fd < 0) return {};
    EXPECT_EQ(rbind(fd, src, len), 0) << strerror(errno);
    EXPECT_EQ(rfcntl(fd, F_SETFL, O_NONBLOCK), 0);
    errno = 0;
    int ret = rconnect(fd, dst, len);
    EXPECT_TRUE(ret == 0 || errno == EINPROGRESS) << strerror(errno);
    auto connected = [&] {
      auto cmds = fake.commands();
      return std::find(cmds.begin(), cmds.end(), Cmd::connect) != cmds.end();
    };
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!connected() && std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLOUT, 0};
      rpoll(&p, 1, 10);
    }
    EXPECT_TRUE(connected()) << "no connect reached the kernel";
    const ucma_abi_conn_param& c = fake.last_connect;
    std::vector<uint8_t> data(c.private_data, c.private_data + c.private_data_len);
    EXPECT_EQ(rclose(fd), 0);
    return data;
  }
};

TEST_F(RsocketAfIb, ConnectionDataAfterRoomForTheIbHeader) {
  sockaddr_ib src{}, dst{};
  src.sib_family = dst.sib_family = AF_IB;
  src.sib_pkey = dst.sib_pkey = htobe16(0xFFFF);
  for (int b = 0; b < 16; ++b) {
    src.sib_addr.sib_raw[b] = static_cast<uint8_t>(0x50 + b);
    dst.sib_addr.sib_raw[b] = static_cast<uint8_t>(0xd0 + b);
  }
  dst.sib_sid = htobe64(0x0000000001064e20ull);  // RDMA_PS_TCP, port 20000
  dst.sib_sid_mask = htobe64(~0ull);
  std::vector<uint8_t> data = connect_data(reinterpret_cast<sockaddr*>(&src),
                                           reinterpret_cast<sockaddr*>(&dst), sizeof(src));
  ASSERT_EQ(data.size(), 36 + sizeof(rsocket::wire::ConnData));
  EXPECT_EQ(std::count(data.begin(), data.begin() + 36, 0), 36) << "the header's room, zeroed";
  EXPECT_EQ(data[36 + offsetof(rsocket::wire::ConnData, version)], rsocket::wire::kVersion);
}

TEST_F(RsocketAfIb, ConnectionDataFirstOnAfInet) {
  sockaddr_in src = ipv4("10.0.0.1", 0), dst = ipv4("10.0.0.2", 7471);
  std::vector<uint8_t> data = connect_data(reinterpret_cast<sockaddr*>(&src),
                                           reinterpret_cast<sockaddr*>(&dst), sizeof(src));
  ASSERT_EQ(data.size(), sizeof(rsocket::wire::ConnData));
  EXPECT_EQ(data[offsetof(rsocket::wire::ConnData, version)], rsocket::wire::kVersion);
}

// The passive side reads a request's connection data after the same 36
// bytes on an AF_IB listener (rdma-core 44's rs_accept); a request without
// them is refused. Its answer carries the connection data alone.
TEST_F(RsocketAfIb, AListenerOnAfIbReadsAfterTheHeader) {
  sockaddr_ib src{};
  src.sib_family = AF_IB;
  src.sib_pkey = htobe16(0xFFFF);
  src.sib_sid = htobe64(0x0000000001064e20ull);
  src.sib_sid_mask = htobe64(~0ull);
  int fd = ::rsocket(AF_IB, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(rbind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)), 0) << strerror(errno);
  ASSERT_EQ(rlisten(fd, 4), 0) << strerror(errno);
  ASSERT_EQ(rfcntl(fd, F_SETFL, O_NONBLOCK), 0);
  auto ids = fake.kernel_ids();
  ASSERT_EQ(ids.size(), 1u);
  uint64_t listener = ids.begin()->second;
  rsocket::wire::ConnData creq{};
  creq.version = rsocket::wire::kVersion;
  creq.credits = htobe16(8);
  // A request from a peer that left no room for the header, then one that did.
  for (size_t offset : {size_t{0}, size_t{36}}) {
    SCOPED_TRACE(offset);
    ucma_abi_event_resp w{};
    w.uid = listener;
    w.event = RDMA_CM_EVENT_CONNECT_REQUEST;
    std::memcpy(w.param.conn.private_data + offset, &creq, sizeof(creq));
    w.param.conn.private_data_len = static_cast<uint8_t>(offset + sizeof(creq));
    size_t start = fake.commands().size();
    fake.queue_raw(fd, w);
    std::vector<Cmd> cmds;
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto answered = [&] {
      cmds = commands_since(start);
      return std::find(cmds.begin(), cmds.end(), Cmd::accept) != cmds.end() ||
             std::find(cmds.begin(), cmds.end(), Cmd::reject) != cmds.end();
    };
    while (!answered() && std::chrono::steady_clock::now() < end) {
      int conn = raccept(fd, nullptr, nullptr);
      if (conn >= 0) {
        EXPECT_EQ(rclose(conn), 0);
      }
      pollfd p{fd, POLLIN, 0};
      if (!answered()) rpoll(&p, 1, 10);
    }
    bool accepted = std::find(cmds.begin(), cmds.end(), Cmd::accept) != cmds.end();
    bool rejected = std::find(cmds.begin(), cmds.end(), Cmd::reject) != cmds.end();
    EXPECT_EQ(accepted, offset == 36);
    EXPECT_EQ(rejected, offset == 0);
    if (accepted) {
      EXPECT_EQ(fake.last_conn.private_data_len, sizeof(creq)) << "the answer has no header";
      EXPECT_EQ(fake.last_conn.private_data[offsetof(rsocket::wire::ConnData, version)],
                rsocket::wire::kVersion);
    }
  }
  EXPECT_EQ(rclose(fd), 0);
}

}  // namespace
}  // namespace rdmacm::testing
