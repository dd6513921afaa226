// Two hosts on one machine, for tests as root: network namespaces `a` (10.77.0.1 on va) and `b`
// (10.77.0.2 on vb) joined by a veth pair, loopback up in each: their own interfaces, addresses and
// routes, as two machines on one network have. Used by tests/test_comm_hosts.cpp (brigade launch
// across them) and tests/test_comm_clusters.cpp (mpirun across them).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "comm/run_command.h"

namespace test {

// Names carry our pid, so parallel runs never collide, and a run killed before cleaning up is
// recognised (and cleaned) by the next one.
inline const std::string kPrefix = "brigade-test-";

inline void remove_namespace(const std::string& ns) {
  // Every process in it first (a namespace with processes lingers after `ip netns del`).
  run_command("ip netns pids " + ns + " | xargs -r kill -9; sleep 0.1; ip netns del " + ns);
}

inline void remove_stale_namespaces() {
  std::istringstream list(run_command("ip netns list").output);
  for (std::string line; std::getline(list, line);) {
    const std::string ns = line.substr(0, line.find(' '));
    if (ns.rfind(kPrefix, 0) != 0) continue;
    const int pid = std::atoi(ns.c_str() + kPrefix.size());
    if (pid > 0 && kill(pid, 0) != 0) remove_namespace(ns);
  }
}

// Two hosts: namespaces `a` (10.77.0.1 on va) and `b` (10.77.0.2 on vb), loopback up in each.
// The destructor runs when a REQUIRE fails too, so nothing is left behind.
class TwoHosts {
 public:
  TwoHosts() {
    static std::atomic<int> count{0};
    const std::string id = kPrefix + std::to_string(getpid()) + "-" + std::to_string(count++);
    a = id + "-a";
    b = id + "-b";
    const std::string setup = "set -e; ip netns add " + a + "; ip netns add " + b + "; ip link add va netns " + a +
                              " type veth peer name vb netns " + b + "; ip -n " + a +
                              " addr add 10.77.0.1/24 dev va; ip -n " + b + " addr add 10.77.0.2/24 dev vb; " +
                              "for n in " + a + " " + b + "; do ip -n $n link set lo up; done; ip -n " + a +
                              " link set va up; ip -n " + b + " link set vb up";
    test::CommandResult r = run_command(setup);
    if (r.status != 0) {  // a constructor that throws gets no destructor: clean up here
      remove_namespace(a);
      remove_namespace(b);
    }
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  ~TwoHosts() {
    remove_namespace(a);
    remove_namespace(b);
  }
  std::string a, b;
};

}  // namespace test
