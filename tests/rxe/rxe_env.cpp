#include "rxe_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

namespace rdmacm::rxe {
namespace {

std::string first_rdma_netdev() {
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return {};
  std::string netdev;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/sys/class/infiniband/") + e->d_name +
                    "/ports/1/gid_attrs/ndevs/0");
    if (std::getline(f, netdev) && !netdev.empty()) break;
  }
  closedir(d);
  return netdev;
}

}  // namespace

std::string device_ip() {
  if (const char* ip = std::getenv("RXE_IP")) return ip;
  std::string netdev = first_rdma_netdev();
  ifaddrs* list = nullptr;
  if (netdev.empty() || getifaddrs(&list)) return {};
  std::string ip;
  for (ifaddrs* a = list; a && ip.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || netdev != a->ifa_name)
      continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    ip = inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
  }
  freeifaddrs(list);
  return ip;
}

sockaddr_in device_addr(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  inet_pton(AF_INET, device_ip().c_str(), &sin.sin_addr);
  return sin;
}

sockaddr_in6 device_addr6(uint16_t port) {
  sockaddr_in6 out{};
  std::string netdev = first_rdma_netdev();
  ifaddrs* list = nullptr;
  if (netdev.empty() || getifaddrs(&list)) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET6 || netdev != a->ifa_name)
      continue;
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
    if (!IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr)) continue;
    out = *sin6;  // carries the scope id of the interface
    out.sin6_port = htons(port);
    break;
  }
  freeifaddrs(list);
  return out;
}

bool reference() { return std::getenv("RDMACM_REFERENCE") != nullptr; }

long sent_packets() {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ifstream f("/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts");
  long n = -1;
  f >> n;
  return n;
}

}  // namespace rdmacm::rxe
