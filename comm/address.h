// Which address a rank tells its peers to connect to.
//
// A rank listens on one of its host's addresses and publishes it in the store; every peer then
// connects there. On a single machine that is 127.0.0.1. Across machines it must be an address the
// other hosts can reach, and the usual guess — "whatever this host's name resolves to" — is
// 127.0.0.1 or 127.0.1.1 on many containers, VMs and Debian installs, which fails only once a peer
// on another machine tries it. So the default is the question the kernel can answer exactly: which
// local address would a packet to MASTER_ADDR leave from? (A UDP socket "connected" to that
// address sends nothing; getsockname() then names the source address its route picked.) Every
// host of a job reaches rank 0 over the network the ranks share, so that address is on it.
//
// In order, the first that applies:
//   BRIGADE_GLOO_IFACE=eth1      that interface's IPv4 address
//   BRIGADE_GLOO_HOST=10.1.2.3   that host name or address
//   MASTER_ADDR set              the local address that routes to MASTER_ADDR
//   one machine (file store)     127.0.0.1
//   several machines, file store the one non-loopback IPv4 address this host has (else an error
//                                listing them, asking for BRIGADE_GLOO_IFACE)
// and a loopback address we chose in a job that spans machines is an error saying which variable to
// set. (One the user set is taken as given: several "nodes" on one machine are a fine test.)
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "comm/launch_env.h"

namespace brigade::comm {

struct AdvertisedAddress {
  std::string address;    // numeric, e.g. "10.0.0.2"
  std::string interface;  // the interface holding it ("eth0"), or empty when none does (a name that
                          // resolves elsewhere)
  std::string why;        // "routes to MASTER_ADDR=10.0.0.1", for messages and the log
};

// Throws an Error saying what to set when no usable address can be chosen (see above).
AdvertisedAddress choose_address(const LaunchEnv& env, const GetEnv& getenv);

// The local address a packet to host:port would leave from. Throws naming the host when it does not
// resolve or there is no route.
std::string address_towards(const std::string& host, int port);

// The interface that holds `address` ("lo" for 127.0.0.1), or empty.
std::string interface_holding(const std::string& address);

// Up, non-loopback IPv4 addresses of this host, as (interface, address).
std::vector<std::pair<std::string, std::string>> network_addresses();

bool is_loopback(const std::string& address);  // 127.0.0.0/8 or ::1

}  // namespace brigade::comm
