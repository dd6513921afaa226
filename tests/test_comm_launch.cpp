// `brigade launch`: its flags, its output relay, and how it supervises ranks (through the real CLI
// and tests/comm/comm_worker). No communication backend is needed here.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <thread>

#include "comm/background.h"
#include "comm/run_command.h"
#include "launch/options.h"
#include "launch/output.h"

using namespace brigade::launch;
using Catch::Contains;

namespace {

const std::string kLaunch = std::string(BRIGADE_CLI) + " launch";
const std::string kWorker = COMM_WORKER;

LaunchOptions parse(const std::vector<std::string>& args) {
  bool help = false;
  return parse_launch_args(args, &help);
}

}  // namespace

TEST_CASE("launch: flags", "[comm][launch]") {
  LaunchOptions o = parse({"-n", "4", "--store", "tcp", "--grace", "0.5", "--timeout", "2", "--", "prog", "-n", "x"});
  REQUIRE(o.nprocs == 4);
  REQUIRE(o.store == "tcp");
  REQUIRE(o.grace_seconds == 0.5);
  REQUIRE(o.timeout == "2");
  REQUIRE(o.connect_timeout.empty());
  REQUIRE(parse({"-n", "2", "--connect-timeout", "90", "p"}).connect_timeout == "90");
  REQUIRE(o.command == std::vector<std::string>{"prog", "-n", "x"});
  // Without "--" the program starts at the first non-flag word; its own flags are left alone.
  o = parse({"--nprocs", "2", "prog", "--store", "x"});
  REQUIRE(o.command == std::vector<std::string>{"prog", "--store", "x"});
  REQUIRE(o.store == "file");
  bool help = false;
  parse_launch_args({"--help"}, &help);
  REQUIRE(help);
  REQUIRE_THROWS_WITH(parse({"prog"}), Contains("-n: the number of processes is required"));
  REQUIRE_THROWS_WITH(parse({"-n", "0", "prog"}), Contains("-n: expected an integer from 1 to 4096, got '0'"));
  REQUIRE_THROWS_WITH(parse({"-n", "2"}), Contains("no program to run"));
  REQUIRE_THROWS_WITH(parse({"-n"}), Contains("-n: missing value"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--store", "nfs", "p"}), Contains("expected file or tcp, got 'nfs'"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--grace", "-1", "p"}), Contains("--grace: expected a non-negative"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--timeout", "0", "p"}), Contains("--timeout: must be positive"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--connect-timeout", "0", "p"}),
                      Contains("--connect-timeout: must be positive"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--frobnicate", "p"}), Contains("unknown flag '--frobnicate'"));
  // The shared flag loop (tools/cli/flags.h): --flag=value too, and a dash word that is no flag of
  // launch's is an error before "--" and the program after it.
  REQUIRE(parse({"--nprocs=3", "--grace=1", "prog"}).nprocs == 3);
  REQUIRE_THROWS_WITH(parse({"-n", "2", "-x", "prog"}), Contains("unknown flag '-x'"));
  REQUIRE(parse({"-n", "2", "--", "-x", "--store", "y"}).command == std::vector<std::string>{"-x", "--store", "y"});
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--store", "p"}), Contains("--store: expected file or tcp, got 'p'"));
}

TEST_CASE("launch: flags for several machines and restarts", "[comm][launch]") {
  LaunchOptions o = parse({"--nnodes", "3", "--node-rank", "2", "--master-addr", "10.0.0.1", "--master-port", "29400",
                           "--max-restarts", "4", "--node-timeout", "7.5", "-n", "2", "prog"});
  REQUIRE(o.nnodes == 3);
  REQUIRE(o.node_rank == 2);
  REQUIRE(o.master_addr == "10.0.0.1");
  REQUIRE(o.master_port == 29400);
  REQUIRE(o.max_restarts == 4);
  REQUIRE(o.node_timeout_seconds == 7.5);
  REQUIRE(o.store == "tcp");  // machines meet through node 0's TCP store
  REQUIRE(parse({"-n", "2", "prog"}).store == "file");
  REQUIRE_THROWS_WITH(parse({"--nnodes", "2", "--node-rank", "2", "-n", "1", "--master-addr", "h", "--master-port",
                             "1", "p"}),
                      Contains("--node-rank 2 is not below --nnodes 2"));
  REQUIRE_THROWS_WITH(parse({"--nnodes", "2", "-n", "1", "p"}),
                      Contains("--master-addr and --master-port are needed"));
  REQUIRE_THROWS_WITH(parse({"--nnodes", "2", "-n", "1", "--master-addr", "h", "--master-port", "1", "--store",
                             "file", "p"}),
                      Contains("--store file: several machines meet through node 0's TCP store"));
  REQUIRE_THROWS_WITH(parse({"--master-port", "70000", "-n", "1", "p"}),
                      Contains("--master-port: expected an integer from 1 to 65535, got '70000'"));
  REQUIRE_THROWS_WITH(parse({"--max-restarts", "-1", "-n", "1", "p"}), Contains("--max-restarts: expected an integer"));
  REQUIRE_THROWS_WITH(parse({"--node-timeout", "1.5", "-n", "1", "p"}),
                      Contains("--node-timeout: must be at least 2 seconds"));
}

TEST_CASE("launch: output lines are prefixed whatever the chunking", "[comm][launch]") {
  LinePrefixer lines("[rank 3] ");
  REQUIRE(lines.feed("hel", 3).empty());
  REQUIRE(lines.feed("lo\nwor", 6) == "[rank 3] hello\n");
  REQUIRE(lines.feed("ld\n\nx", 5) == "[rank 3] world\n[rank 3] \n");
  REQUIRE(lines.flush() == "[rank 3] x\n");
  REQUIRE(lines.flush().empty());
}

TEST_CASE("launch: every rank gets its place and a rendezvous", "[comm][launch]") {
  test::CommandResult r = test::run_command(kLaunch + " -n 3 -- " + kWorker + " env");
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (int rank = 0; rank < 3; ++rank)
    REQUIRE_THAT(r.output, Contains("[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                                    " of 3 (local rank " + std::to_string(rank) + " of 3, brigade launch; store: /"));
  r = test::run_command(kLaunch + " -n 2 --store tcp " + kWorker + " env");
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Contains("[rank 1] rank 1 of 2 (local rank 1 of 2, brigade launch; store: 127.0.0.1:"));
}

TEST_CASE("launch: a failing rank stops the others and sets the exit status", "[comm][launch]") {
  // Ranks 0 and 2 would sleep for a minute; rank 1 exits with 7 at once.
  test::CommandResult r = test::run_command(kLaunch + " -n 3 --grace 1 -- " + kWorker + " fail");
  INFO(r.output);
  REQUIRE(r.status == 7);
  REQUIRE_THAT(r.output, Contains("[rank 1] failing on purpose") &&
                             Contains("brigade launch: rank 1 exited with status 7; stopping the other ranks"));
  REQUIRE(r.seconds < 20);
}

TEST_CASE("launch: bad command lines and programs that cannot start", "[comm][launch]") {
  test::CommandResult r = test::run_command(kLaunch + " " + kWorker);
  REQUIRE(r.status == 2);
  REQUIRE_THAT(r.output, Contains("the number of processes is required") && Contains("usage: brigade launch"));
  r = test::run_command(kLaunch + " -n 2 /nonexistent/program");
  REQUIRE(r.status == 127);
  REQUIRE_THAT(r.output, Contains("brigade launch: cannot run '/nonexistent/program'"));
  r = test::run_command(kLaunch + " --help");
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Contains("RANK, WORLD_SIZE, LOCAL_RANK"));
}

// Two "nodes" on this machine, over loopback (the address a rank advertises is then chosen by hand:
// BRIGADE_GLOO_HOST, comm/address.h). Each launcher is a process of its own, as on two hosts.
namespace {

struct TwoNodes {
  test::CommandResult node0, node1;
};

std::string two_nodes_launch(int port, const std::string& flags) {
  return "env BRIGADE_GLOO_HOST=127.0.0.1 " + kLaunch + " --nnodes 2 --master-addr 127.0.0.1 --master-port " +
         std::to_string(port) + " " + flags;
}

TwoNodes run_two_nodes(const std::string& flags, const std::string& scenario) {
  const std::string common = two_nodes_launch(test::free_port(), flags);
  TwoNodes out;
  std::thread other([&] {
    out.node1 = test::run_command(common + " --node-rank 1 -- " + kWorker + " " + scenario);
  });
  out.node0 = test::run_command(common + " --node-rank 0 -- " + kWorker + " " + scenario);
  other.join();
  return out;
}

}  // namespace

TEST_CASE("launch: two nodes number their ranks node by node and share one rendezvous", "[comm][launch]") {
  TwoNodes r = run_two_nodes("-n 2", "env");
  INFO("node 0:\n" << r.node0.output << "\nnode 1:\n" << r.node1.output);
  REQUIRE(r.node0.status == 0);
  REQUIRE(r.node1.status == 0);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string& out = rank < 2 ? r.node0.output : r.node1.output;
    REQUIRE_THAT(out, Contains("[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                               " of 4 (local rank " + std::to_string(rank % 2) +
                               " of 2, brigade launch; store: 127.0.0.1:"));
  }
}

TEST_CASE("launch: a rank failing on one node stops the other node, and both exit with its status",
          "[comm][launch]") {
  // Rank 1 (node 0) exits 7 at once; ranks 0, 2 and 3 would sleep for a minute.
  TwoNodes r = run_two_nodes("-n 2 --grace 1", "fail");
  INFO("node 0:\n" << r.node0.output << "\nnode 1:\n" << r.node1.output);
  REQUIRE(r.node0.status == 7);
  REQUIRE(r.node1.status == 7);
  REQUIRE(r.node0.seconds < 20);
  REQUIRE(r.node1.seconds < 20);
  REQUIRE_THAT(r.node0.output, Contains("brigade launch: rank 1 exited with status 7; stopping the other ranks"));
  REQUIRE_THAT(r.node1.output, Contains("rank 1 exited with status 7; stopping this node's ranks"));
}

TEST_CASE("launch: --max-restarts restarts every node's ranks after a failure, then gives up", "[comm][launch]") {
  // Rank 1 fails on the first run only: one restart, then every rank of the second run succeeds.
  TwoNodes r = run_two_nodes("-n 2 --grace 1 --max-restarts 1", "fail-once");
  INFO("node 0:\n" << r.node0.output << "\nnode 1:\n" << r.node1.output);
  REQUIRE(r.node0.status == 0);
  REQUIRE(r.node1.status == 0);
  REQUIRE_THAT(r.node0.output,
               Contains("brigade launch: restarting the job (restart 1 of 1) after: rank 1 exited with status 7"));
  REQUIRE(test::count(r.node0.output, "] run 1 ok") == 2);
  REQUIRE(test::count(r.node1.output, "] run 1 ok") == 2);
  // A failure on every run: the restarts are used up and the status is the rank's.
  test::CommandResult one = test::run_command(kLaunch + " -n 3 --grace 1 --max-restarts 2 -- " + kWorker + " fail");
  INFO(one.output);
  REQUIRE(one.status == 7);
  REQUIRE(test::count(one.output, "restarting the job") == 2);
  REQUIRE_THAT(one.output, Contains("(restart 2 of 2)") && Contains("no restarts left (--max-restarts 2)"));
}

TEST_CASE("launch: a node whose launcher never comes, or vanishes, ends the job in bounded time", "[comm][launch]") {
  // Node 1 is never started: node 0 gives up at the connect timeout, naming it.
  const int port = test::free_port();
  test::CommandResult r = test::run_command(kLaunch + " --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port " +
                                            std::to_string(port) + " --connect-timeout 1 -n 1 -- " + kWorker + " env");
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Contains("node(s) 1 never connected to 127.0.0.1:" + std::to_string(port)));
  REQUIRE(r.seconds < 10);
  // Node 0 is never started: node 1 gives up at the connect timeout, saying where it tried.
  r = test::run_command(kLaunch + " --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port " +
                        std::to_string(port) + " --connect-timeout 1 -n 1 -- " + kWorker + " env");
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Contains("could not reach node 0's launcher at 127.0.0.1:" + std::to_string(port)));
  REQUIRE(r.seconds < 10);
}

TEST_CASE("launch: a node whose launcher goes silent is lost after --node-timeout, and the job ends", "[comm][launch]") {
  // Node 1's launcher is frozen (SIGSTOP: its socket stays open, it just says nothing — like a host
  // that hangs or a network that drops everything); node 0 hears no heartbeat for 2 s.
  const int port = test::free_port();
  const std::string dir = "/tmp/brigade-test-silent-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  test::Background node1(two_nodes_launch(port, "-n 1 --grace 1 --node-timeout 2") + " --node-rank 1 -- " + kWorker +
                             " wait",
                         dir + "/node1.log");
  test::Background node0(two_nodes_launch(port, "-n 1 --grace 1 --node-timeout 2") + " --node-rank 0 -- " + kWorker +
                             " wait",
                         dir + "/node0.log");
  REQUIRE(node1.wait_for_output("[rank 1] waiting", 30));
  const std::vector<int> node1_ranks = test::children_of(node1.pid());
  REQUIRE(kill(node1.pid(), SIGSTOP) == 0);
  const auto frozen = std::chrono::steady_clock::now();
  const int status = node0.wait(30);
  INFO(node0.output());
  REQUIRE(status == 1);
  REQUIRE_THAT(node0.output(), Contains("lost node 1's launcher (nothing heard for 2 s"));
  REQUIRE(std::chrono::duration<double>(node0.ended() - frozen).count() < 2 + 1 + 3);
  for (int pid : node1_ranks) kill(pid, SIGKILL);  // its ranks live in process groups of their own
  kill(node1.pid(), SIGKILL);
  std::filesystem::remove_all(dir);
}
