#include "comm/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "comm/socket.h"
#include "core/error.h"

namespace brigade::comm {

namespace {

// Every (interface, address) pair of this host, IPv4 and IPv6, of interfaces that are up.
std::vector<std::pair<std::string, std::string>> all_addresses() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || !(a->ifa_flags & IFF_UP)) continue;
    if (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6) continue;
    out.push_back({a->ifa_name, address_text(a->ifa_addr)});
  }
  freeifaddrs(list);
  return out;
}

std::string list_of(const std::vector<std::pair<std::string, std::string>>& addresses) {
  std::string s;
  for (const auto& [name, address] : addresses) s += (s.empty() ? "" : ", ") + name + " " + address;
  return s.empty() ? "none" : s;
}

std::string value_of(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? v : "";
}

// The first address `host` resolves to, numeric ("localhost" -> "127.0.0.1").
std::string resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  BRIGADE_CHECK(rc == 0 && found != nullptr, "comm: cannot resolve '", host, "': ", gai_strerror(rc));
  std::string address = address_text(found->ai_addr);
  freeaddrinfo(found);
  return address;
}

}  // namespace

bool is_loopback(const std::string& address) { return address.rfind("127.", 0) == 0 || address == "::1"; }

std::string address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port > 0 ? port : 9).c_str(), &hints, &found);
  BRIGADE_CHECK(rc == 0 && found != nullptr, "comm: cannot resolve MASTER_ADDR '", host, "': ", gai_strerror(rc));
  std::string error = "no address";
  std::string source;
  for (addrinfo* a = found; a != nullptr && source.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // connect() on a datagram socket only picks the route and source address; nothing is sent.
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0)
      source = address_text(reinterpret_cast<sockaddr*>(&local));
    else
      error = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  BRIGADE_CHECK(!source.empty(), "comm: no route from this host to MASTER_ADDR '", host, "' (", error, ")");
  return source;
}

std::string interface_holding(const std::string& address) {
  for (const auto& [name, a] : all_addresses())
    if (a == address) return name;
  return "";
}

std::vector<std::pair<std::string, std::string>> network_addresses() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, address] : all_addresses())
    if (!is_loopback(address) && address.find(':') == std::string::npos) out.push_back({name, address});
  return out;
}

AdvertisedAddress choose_address(const LaunchEnv& env, const GetEnv& getenv) {
  const bool several_machines = env.local_world_size < env.world_size;
  AdvertisedAddress chosen;
  if (const std::string iface = value_of(getenv, "BRIGADE_GLOO_IFACE"); !iface.empty()) {
    for (const auto& [name, address] : all_addresses())
      if (name == iface && address.find(':') == std::string::npos) chosen = {address, name, "BRIGADE_GLOO_IFACE=" + iface};
    BRIGADE_CHECK(!chosen.address.empty(), "comm: BRIGADE_GLOO_IFACE=", iface,
                  " is not an interface with an IPv4 address that is up on this host (it has: ",
                  list_of(all_addresses()), ")");
  } else if (const std::string host = value_of(getenv, "BRIGADE_GLOO_HOST"); !host.empty()) {
    const std::string address = resolve(host);
    chosen = {address, interface_holding(address), "BRIGADE_GLOO_HOST=" + host};
  } else if (!env.master_addr.empty()) {
    const std::string address = address_towards(env.master_addr, env.master_port);
    chosen = {address, interface_holding(address), "routes to MASTER_ADDR=" + env.master_addr};
  } else if (!several_machines) {
    chosen = {"127.0.0.1", "lo", "the whole job runs on this machine"};
  } else {
    const auto candidates = network_addresses();
    BRIGADE_CHECK(candidates.size() == 1, "comm: ", env.str(),
                  " spans several machines and has no MASTER_ADDR to find its network by, and this host has ",
                  candidates.size(), " candidate addresses (", list_of(candidates),
                  "): set BRIGADE_GLOO_IFACE to the interface on the network the ranks share");
    chosen = {candidates[0].second, candidates[0].first, "the only network address of this host"};
  }
  // What the user chose is used as given, loopback included (several "nodes" simulated on one
  // machine); only a guess of ours may not be loopback in a job across machines.
  const bool chosen_by_user = chosen.why.rfind("BRIGADE_GLOO_", 0) == 0;
  BRIGADE_CHECK(chosen_by_user || !several_machines || !is_loopback(chosen.address), "comm: ", env.str(), " would listen on ",
                chosen.address, " (", chosen.why, "), a loopback address, but the job spans several machines (",
                env.local_world_size, " of its ", env.world_size,
                " ranks on this one), so ranks elsewhere could not reach it: set MASTER_ADDR to rank 0's address on "
                "the network the ranks share, or BRIGADE_GLOO_IFACE to that network's interface here (this host has: ",
                list_of(network_addresses()), "), or BRIGADE_GLOO_HOST to this host's address on it");
  return chosen;
}

}  // namespace brigade::comm
