// Where the integration tests find the RDMA device they run on.
#pragma once

#include <netinet/in.h>

#include <string>

namespace rdmacm::rxe {

// IPv4 address of the RDMA-capable netdev: $RXE_IP (set by the VM runner),
// else the first IPv4 address of the netdev behind the first RDMA device.
std::string device_ip();

// sockaddr_in for device_ip() and the given port (host order).
sockaddr_in device_addr(uint16_t port = 0);

// The device netdev's IPv6 link-local address with its scope id (port in
// host order); sin6_family is 0 if there is none.
sockaddr_in6 device_addr6(uint16_t port = 0);

// True when the tests run against rdma-core's library (RDMACM_REFERENCE set):
// tests of deliberate improvements (e.g. misuse rdma-core crashes on) skip.
bool reference();

// rxe0's sent-packet counter (a data-path case counts only if its bytes crossed
// the device). The kernel refreshes hw_counters at most every 10 ms, so this
// waits that long first: a read right after the traffic can show none of it.
long sent_packets();

}  // namespace rdmacm::rxe
