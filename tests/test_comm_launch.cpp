// `brigade launch`: its flags, its output relay, and how it supervises ranks (through the real CLI
// and tests/comm/comm_worker). No communication backend is needed here.
#include <catch2/catch.hpp>

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
  REQUIRE_THROWS_WITH(parse({"-n", "0", "prog"}), Contains("expected a number of processes from 1 to 4096, got '0'"));
  REQUIRE_THROWS_WITH(parse({"-n", "2"}), Contains("no program to run"));
  REQUIRE_THROWS_WITH(parse({"-n"}), Contains("-n: missing value"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--store", "nfs", "p"}), Contains("expected file or tcp, got 'nfs'"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--grace", "-1", "p"}), Contains("--grace: expected a non-negative"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--timeout", "0", "p"}), Contains("--timeout: must be positive"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--connect-timeout", "0", "p"}),
                      Contains("--connect-timeout: must be positive"));
  REQUIRE_THROWS_WITH(parse({"-n", "2", "--frobnicate", "p"}), Contains("unknown flag '--frobnicate'"));
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
