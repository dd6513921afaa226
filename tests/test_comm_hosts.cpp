// Several machines, for real: two network namespaces joined by a veth pair are two hosts with
// their own interfaces, addresses, routes and loopback (10.77.0.1 and 10.77.0.2). On them, the
// real `brigade launch --nnodes 2` runs a 4-stage pipeline of `brigade train`, two ranks per host:
// it must train with no variable beyond the launcher's flags and equal the same pipeline on threads
// bit for bit, also over a shaped (slow, lossy) link; and when a host dies or its link goes down
// mid-step, every surviving launcher must exit non-zero within the timeout plus a few seconds,
// leaving a complete checkpoint.
//
// Needs root and `ip netns` (Debian's iproute2). Where namespaces cannot be made, the whole program
// exits 77 (meson: SKIP) saying why; `[shaped]` also skips when the kernel has neither netem nor tbf.
#define CATCH_CONFIG_RUNNER
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "comm/background.h"
#include "comm/cleanup_on_signal.h"
#include "comm/run_command.h"
#include "comm/two_hosts.h"
#include "test_util.h"

using namespace brigade;
using Catch::Contains;

namespace {

using Clock = std::chrono::steady_clock;
using test::Background;
using test::kPrefix;
using test::remove_namespace;
using test::remove_stale_namespaces;
using test::TwoHosts;

const std::string kCli = BRIGADE_CLI;
const std::string kWorker = COMM_WORKER;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

bool sh(const std::string& command) { return test::run_command(command).status == 0; }

std::string fresh_dir() {
  char pattern[] = "/tmp/brigade-test-hosts-XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  return pattern;
}

// `brigade train` small enough for two cores; --clip 0 because the global norm's all-reduce may add
// partial sums in another order than threads do (see tests/test_comm_gloo.cpp).
std::string train(int steps, const std::string& extra) {
  return kCli + " train --stages 4 --schedule 1f1b --microbatches 4 --batch 16 --steps " + std::to_string(steps) +
         " --layers 2 --heads 2 --embd 32 --digits 4 --warmup 5 --log-every 10 --eval 20 --clip 0 --trace none "
         "--svg none --threads 1 --device cpu " +
         extra;
}

// `brigade launch` on host `ns` as node `node` of 2, two ranks, with nothing in the environment that
// chooses addresses: the launcher's flags must be enough.
std::string launch_on(const std::string& ns, int node, const std::string& flags, const std::string& program) {
  return "ip netns exec " + ns + " env -u BRIGADE_GLOO_IFACE -u BRIGADE_GLOO_HOST -u NCCL_SOCKET_IFNAME " + kCli +
         " launch --nnodes 2 --node-rank " + std::to_string(node) +
         " --master-addr 10.77.0.1 --master-port 29400 -n 2 " + flags + " -- " + program;
}

// Trains `steps` across the two hosts and on threads here; both checkpoints must be equal.
void require_hosts_equal_threads(const TwoHosts& hosts, int steps) {
  const std::string dir = fresh_dir();
  const std::string program = train(steps, "--save " + dir + "/hosts.safetensors");
  Background node1(launch_on(hosts.b, 1, "--timeout 60", program), dir + "/b.log");
  Background node0(launch_on(hosts.a, 0, "--timeout 60", program), dir + "/a.log");
  const int status0 = node0.wait(240), status1 = node1.wait(30);
  INFO("node 0:\n" << node0.output() << "\nnode 1:\n" << node1.output());
  REQUIRE(status0 == 0);
  REQUIRE(status1 == 0);
  REQUIRE_THAT(node0.output(), Contains("[rank 0] pipeline: 4 stages on 4 ranks (processes), schedule 1f1b"));
  test::CommandResult threads = test::run_command(train(steps, "--save " + dir + "/threads.safetensors"));
  INFO(threads.output);
  REQUIRE(threads.status == 0);
  test::require_same_checkpoint(dir + "/hosts.safetensors", dir + "/threads.safetensors");
  std::filesystem::remove_all(dir);
}

// netem (delay and loss) where the kernel has it; else tbf, whose rate limit delays packets in a
// queue and drops those that would wait too long. Returns the discipline used, or empty if neither.
std::string shape_link(const std::string& ns, const std::string& dev) {
  if (sh("ip netns exec " + ns + " tc qdisc replace dev " + dev + " root netem delay 5ms 2ms loss 2%")) return "netem";
  if (sh("ip netns exec " + ns + " tc qdisc replace dev " + dev + " root tbf rate 2mbit burst 4kb latency 20ms"))
    return "tbf";
  return "";
}

// SIGKILLs one `brigade train` process (a rank, not the launcher) running on host `ns`.
bool kill_a_trainer(const std::string& ns) {
  return sh("for p in $(ip netns pids " + ns + "); do if tr '\\0' ' ' < /proc/$p/cmdline | "
            "grep -q '^[^ ]*brigade train '; then kill -9 $p; exit 0; fi; done; exit 1");
}

int64_t dropped_packets(const std::string& ns, const std::string& dev) {
  std::string stats = test::run_command("ip netns exec " + ns + " tc -s qdisc show dev " + dev).output;
  const size_t at = stats.find("dropped ");
  return at == std::string::npos ? -1 : std::atoll(stats.c_str() + at + 8);
}

}  // namespace

TEST_CASE("hosts: each rank advertises the address that routes to MASTER_ADDR", "[hosts]") {
  TwoHosts hosts;
  // Rank 2 of 4, on host b: its host name resolves to 127.0.0.1 on many machines; the route does not.
  test::CommandResult r = test::run_command(
      "ip netns exec " + hosts.b +
      " env -u BRIGADE_GLOO_IFACE -u BRIGADE_GLOO_HOST RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 "
      "MASTER_ADDR=10.77.0.1 MASTER_PORT=29400 " +
      kWorker + " address");
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Contains("advertises 10.77.0.2 on vb (routes to MASTER_ADDR=10.77.0.1)"));
  // With MASTER_ADDR on loopback, a job across hosts is refused before anything waits, saying what to set.
  r = test::run_command("ip netns exec " + hosts.b +
                        " env -u BRIGADE_GLOO_IFACE -u BRIGADE_GLOO_HOST RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 "
                        "LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29400 BRIGADE_CONNECT_TIMEOUT=30 " +
                        kWorker + " ring");
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Contains("a loopback address") && Contains("vb 10.77.0.2"));
  REQUIRE(r.seconds < 10);
}

TEST_CASE("hosts: a 4-stage pipeline on 2 hosts x 2 ranks trains bit for bit as on threads", "[hosts]") {
  TwoHosts hosts;
  require_hosts_equal_threads(hosts, 30);
}

TEST_CASE("hosts: a failure anywhere ends the job on every host, in bounded time", "[hosts]") {
  // Each fault strikes mid-run, after at least one checkpoint; the survivors must exit non-zero within
  // the call timeout (5 s) plus a few seconds, and the checkpoint must be a complete one.
  for (const std::string fault : {"kill host", "link down", "rank fails"}) {
    DYNAMIC_SECTION(fault) {
      TwoHosts hosts;
      const std::string dir = fresh_dir();
      const std::string program = train(5000, "--save " + dir + "/ck.safetensors --save-every 10");
      const std::string failing = fault == "rank fails" ? " --grace 1" : "";
      Background node1(launch_on(hosts.b, 1, "--timeout 5" + failing, program), dir + "/b.log");
      Background node0(launch_on(hosts.a, 0, "--timeout 5" + failing, program), dir + "/a.log");
      REQUIRE(node0.wait_for_output("saved " + dir + "/ck.safetensors at step 20", 120));
      const auto struck = Clock::now();
      if (fault == "kill host") {
        REQUIRE(sh("ip netns pids " + hosts.b + " | xargs -r kill -9"));
      } else if (fault == "link down") {
        REQUIRE(sh("ip -n " + hosts.b + " link set vb down"));
      } else {  // one rank on host b dies; everything else is healthy
        REQUIRE(kill_a_trainer(hosts.b));
      }
      const int status0 = node0.wait(60), status1 = node1.wait(60);
      INFO("node 0:\n" << node0.output() << "\nnode 1:\n" << node1.output());
      REQUIRE(status0 > 0);
      REQUIRE(status1 > 0);
      const double bound = 5 + 7;  // the call timeout, and start-up, grace and slack on a busy machine
      REQUIRE(seconds_between(struck, node0.ended()) < bound);
      if (fault != "kill host") REQUIRE(seconds_between(struck, node1.ended()) < bound);
      // Every error is named: a timeout, a lost peer, or the rank that died.
      if (fault == "kill host") REQUIRE_THAT(node0.output(), Contains("lost node 1's launcher") ||
                                                                 Contains("did that rank exit or abort?"));
      if (fault == "link down") {
        REQUIRE_THAT(node0.output(), Contains("timed out after 5 s"));
        REQUIRE_THAT(node1.output(), Contains("timed out after 5 s"));
      }
      if (fault == "rank fails") {
        REQUIRE_THAT(node1.output(), Contains("was killed by signal 9"));
        REQUIRE_THAT(node0.output(), Contains("; stopping the"));
      }
      // The checkpoint is the complete previous one or the complete new one.
      nn::Checkpoint ck = nn::load_checkpoint(dir + "/ck.safetensors");
      REQUIRE(std::stoi(ck.metadata.at("step")) % 10 == 0);
      REQUIRE(std::stoi(ck.metadata.at("step")) >= 20);
      std::filesystem::remove_all(dir);
    }
  }
}

TEST_CASE("hosts: a host cut off is not restarted around: the job ends even with restarts left", "[hosts]") {
  // The ranks time out first (2 s: a restartable failure), then the launchers lose each other (4 s
  // of silence): a lost node forbids the restart, whichever came first, and nobody waits forever.
  TwoHosts hosts;
  const std::string dir = fresh_dir();
  const std::string program = train(5000, "--save " + dir + "/ck.safetensors --save-every 10");
  const std::string flags = "--timeout 2 --node-timeout 4 --max-restarts 2";
  Background node1(launch_on(hosts.b, 1, flags, program), dir + "/b.log");
  Background node0(launch_on(hosts.a, 0, flags, program), dir + "/a.log");
  REQUIRE(node0.wait_for_output("saved " + dir + "/ck.safetensors at step 20", 120));
  REQUIRE(sh("ip -n " + hosts.b + " link set vb down"));
  const auto struck = Clock::now();
  const int status0 = node0.wait(60), status1 = node1.wait(60);
  INFO("node 0:\n" << node0.output() << "\nnode 1:\n" << node1.output());
  REQUIRE(status0 > 0);
  REQUIRE(status1 > 0);
  REQUIRE(seconds_between(struck, node0.ended()) < 4 + 8);
  REQUIRE(seconds_between(struck, node1.ended()) < 4 + 8);
  REQUIRE_THAT(node0.output(), Contains("lost node 1's launcher (nothing heard for 4 s"));
  REQUIRE_THAT(node1.output(), Contains("lost node 0's launcher (nothing heard for 4 s"));
  REQUIRE(test::count(node0.output(), "restarting the job") == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("hosts: with --max-restarts both hosts restart after a rank dies, and the job ends as if uninterrupted",
          "[hosts]") {
  TwoHosts hosts;
  const std::string dir = fresh_dir();
  const std::string program = train(150, "--save " + dir + "/ck/ --save-every 10");
  Background node1(launch_on(hosts.b, 1, "--timeout 20 --max-restarts 1", program), dir + "/b.log");
  Background node0(launch_on(hosts.a, 0, "--timeout 20 --max-restarts 1", program), dir + "/a.log");
  REQUIRE(node0.wait_for_output("saved " + dir + "/ck/step-00000020 ", 120));
  REQUIRE(kill_a_trainer(hosts.b));
  const int status0 = node0.wait(240), status1 = node1.wait(30);
  INFO("node 0:\n" << node0.output() << "\nnode 1:\n" << node1.output());
  REQUIRE(status0 == 0);
  REQUIRE(status1 == 0);
  REQUIRE_THAT(node0.output(), Contains("brigade launch: restarting the job (restart 1 of 1) after: rank ") &&
                                   Contains("resumed from " + dir + "/ck/step-"));
  test::CommandResult threads = test::run_command(train(150, "--save " + dir + "/threads.safetensors"));
  INFO(threads.output);
  REQUIRE(threads.status == 0);
  test::require_same_checkpoint(dir + "/ck/step-00000150", dir + "/threads.safetensors");
  std::filesystem::remove_all(dir);
}

TEST_CASE("hosts: over a slow, lossy link the pipeline still trains bit for bit", "[shaped]") {
  TwoHosts hosts;
  const std::string how = shape_link(hosts.a, "va");
  REQUIRE(!how.empty());
  REQUIRE(shape_link(hosts.b, "vb") == how);
  WARN("link shaped with " << how);
  require_hosts_equal_threads(hosts, 20);
  // The shaping did something: packets were dropped on the way (TCP resent them).
  REQUIRE(dropped_packets(hosts.a, "va") + dropped_packets(hosts.b, "vb") > 0);
}

// Runs the tests only where they can run: as root, with `ip netns` working; else exit 77 (SKIP).
int main(int argc, char** argv) {
  // Interrupted, remove this run's namespaces (and what runs in them).
  test::clean_up_on_signal("for n in $(ip netns list | grep -o '^" + kPrefix + std::to_string(getpid()) +
                           "-[^ ]*'); do ip netns pids $n | xargs -r kill -9; ip netns del $n; done");
  std::string why;
  if (geteuid() != 0) why = "needs root to create network namespaces";
  else if (!sh("command -v ip")) why = "needs the `ip` command (iproute2)";
  if (why.empty()) {
    remove_stale_namespaces();
    const std::string probe = kPrefix + std::to_string(getpid()) + "-probe";
    test::CommandResult r = test::run_command("ip netns add " + probe + " && ip -n " + probe + " link set lo up");
    if (r.status != 0) why = "cannot create a network namespace here: " + r.output;
    bool shaped_asked = false;
    for (int i = 1; i < argc; ++i) shaped_asked = shaped_asked || std::string(argv[i]) == "[shaped]";
    if (why.empty() && shaped_asked) {
      sh("ip -n " + probe + " link add p0 type veth peer name p1 && ip -n " + probe + " link set p0 up");
      if (shape_link(probe, "p0").empty()) why = "the kernel has neither the netem nor the tbf queueing discipline";
    }
    remove_namespace(probe);
  }
  if (!why.empty()) {
    std::cout << "SKIP: " << why << "\n";
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
