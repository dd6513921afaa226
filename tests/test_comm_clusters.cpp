// The cluster launchers as they are: Slurm's srun (a real single-node cluster, tests/comm/
// slurm_cluster.h), Open MPI's mpirun and MPICH's mpiexec.hydra (where installed) start `brigade
// train --stages 4` as one 4-rank job — no
// wrapper, no variable — whose losses equal `brigade launch -n 4`'s bit for bit; and a rank that
// dies ends every rank with an error within the timeout, under each.
//
// Also mpirun across two hosts made of network namespaces (tests/comm/two_hosts.h), its daemons
// started through a plm_rsh_agent script instead of ssh.
//
// Needs root (Open MPI and slurmd as root) and Debian's slurm-wlm, munge and openmpi-bin (installed
// by scripts/setup.sh); exits 77 (meson: SKIP) where they are absent.
#define CATCH_CONFIG_RUNNER
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "comm/background.h"
#include "comm/cleanup_on_signal.h"
#include "comm/run_command.h"
#include "comm/slurm_cluster.h"
#include "comm/two_hosts.h"
#include "test_util.h"

using Catch::Contains;

namespace {

const std::string kCli = BRIGADE_CLI;
const std::string kWorker = COMM_WORKER;
// Open MPI refuses root without these; two cores hold four ranks only oversubscribed.
const std::string kMpirun =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun.openmpi --oversubscribe --tag-output ";

// Why two hosts cannot be made of network namespaces here ("" when they can): set by main().
std::string no_namespaces;

// A 4-stage pipeline small enough for two cores; --clip 0: see tests/test_comm_gloo.cpp.
const std::string kTrain = kCli +
                           " train --stages 4 --schedule 1f1b --microbatches 4 --batch 16 --steps 20 --layers 2 "
                           "--heads 2 --embd 32 --digits 4 --warmup 5 --log-every 10 --eval 50 --clip 0 --trace none "
                           "--svg none --threads 1 --device cpu";

// Every run bounded: a launcher that hangs is killed by timeout(1) and the test fails on its status.
test::CommandResult run(const std::string& command) { return test::run_command("timeout -k 2 60 env " + command); }

}  // namespace

TEST_CASE("clusters: srun and mpirun give each rank its place and one rendezvous", "[comm][clusters]") {
  test::SlurmCluster slurm;
  test::CommandResult r = run(slurm.env() + "srun --overcommit -n 4 " + kWorker + " env");
  INFO(r.output);
  REQUIRE(r.status == 0);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string store = "store: " + std::string(host) + ":" +
                            std::to_string(29500 + slurm.first_job_id() % 1000) + ")";
  for (int rank = 0; rank < 4; ++rank)
    REQUIRE_THAT(r.output, Contains("rank " + std::to_string(rank) + " of 4 (local rank " + std::to_string(rank) +
                                    " of 4, slurm; " + store));
  // Slurm's PMI2 plugin adds PMI_RANK/PMI_SIZE; Slurm's own variables still describe the job.
  r = run(slurm.env() + "srun --mpi=pmi2 --overcommit -n 2 " + kWorker + " env");
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE(test::count(r.output, " of 2, slurm; store: ") == 2);

  r = run(kMpirun + "-n 4 " + kWorker + " env");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // One port for all four: the one rank 0 serves.
  const size_t at = r.output.find("Open MPI; store: 127.0.0.1:");
  REQUIRE(at != std::string::npos);
  const std::string mpi_store = r.output.substr(at, r.output.find(')', at) - at);
  for (int rank = 0; rank < 4; ++rank)
    REQUIRE_THAT(r.output, Contains("rank " + std::to_string(rank) + " of 4 (local rank " + std::to_string(rank) +
                                    " of 4, " + mpi_store + ")"));

  // MPICH's hydra names no job in the environment: its ranks meet at a port derived from the parent
  // they share. Optional here (the Open MPI runs above are the CI's); setup.sh installs it.
  if (test::run_command("command -v mpiexec.hydra").status == 0) {
    r = run("mpiexec.hydra -n 3 " + kWorker + " env");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const size_t pmi = r.output.find("PMI; store: 127.0.0.1:");
    REQUIRE(pmi != std::string::npos);
    const std::string pmi_store = r.output.substr(pmi, r.output.find(')', pmi) - pmi);
    REQUIRE(test::count(r.output, " of 3, " + pmi_store + ")") == 3);
  } else {
    WARN("mpiexec.hydra (MPICH) is not installed: its launch is not checked");
  }

  // A batch script of an allocation of 4 sees SLURM_PROCID=0 and SLURM_NTASKS=4 but is one process;
  // mpirun's ranks inherit those same variables, and Open MPI's own numbering must win.
  const std::string out = slurm.dir() + "/batch.out";
  r = run(slurm.env() + "sbatch --wait --overcommit -n 4 -o " + out + " --wrap '" + kWorker + " env; " + kMpirun +
          "-n 2 " + kWorker + " env'");
  const std::string batch = test::read_file(out);
  INFO(r.output << batch);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(batch, Contains("rank 0 of 1 (local rank 0 of 1, none)"));
  REQUIRE(test::count(batch, " of 2, Open MPI; store: 127.0.0.1:") == 2);
}

TEST_CASE("clusters: srun -n 4 and mpirun -n 4 train one 4-rank job, equal to brigade launch bit for bit",
          "[comm][clusters]") {
  test::CommandResult launched = run(kCli + " launch -n 4 -- " + kTrain);
  INFO(launched.output);
  REQUIRE(launched.status == 0);
  const std::vector<std::string> want = test::lines_with(launched.output, "loss=");
  REQUIRE(want.size() == 2);

  test::SlurmCluster slurm;
  std::vector<std::string> launchers = {slurm.env() + "srun --overcommit -n 4 ", kMpirun + "-n 4 "};
  if (test::run_command("command -v mpiexec.hydra").status == 0) launchers.push_back("mpiexec.hydra -n 4 ");
  for (const std::string& launcher : launchers) {
    test::CommandResult r = run(launcher + kTrain);
    INFO(launcher << "\n" << r.output);
    REQUIRE(r.status == 0);
    // One job of four processes (four independent jobs would print four banners, each on threads).
    REQUIRE(test::count(r.output, "pipeline: 4 stages on 4 ranks (processes)") == 1);
    REQUIRE(test::lines_with(r.output, "loss=") == want);
    REQUIRE(test::lines_with(r.output, "loss: ") == test::lines_with(launched.output, "loss: "));
  }
}

TEST_CASE("clusters: a rank that dies under srun or mpirun ends every rank with an error within the timeout",
          "[comm][clusters]") {
  // tests/comm/comm_worker's "dies": rank 2 exits with status 3 at its fourth exchange of a ring; the
  // others ignore SIGTERM, so what ends them is their own communicator's error. srun leaves them to
  // it; mpirun sends SIGTERM, then SIGKILL a second later, which under load can come before a
  // survivor has written its error: it is given three here (mpirun then waits out all three, even
  // after every rank has ended, so not more).
  test::SlurmCluster slurm;
  for (const std::string& launcher : {slurm.env() + "srun --label --overcommit -n 4 ",
                                      kMpirun + "--mca odls_base_sigkill_timeout 3 -n 4 "}) {
    test::CommandResult r = run("BRIGADE_COMM_TIMEOUT=5 " + launcher + kWorker + " dies");
    INFO(launcher << "\n" << r.output);
    REQUIRE(r.status == 3);  // rank 2's, passed on by srun and mpirun alike
    // Every survivor reports; the rank that waited on rank 2 names it.
    REQUIRE(test::count(r.output, "error: comm ") == 3);
    REQUIRE_THAT(r.output, Contains("error: comm recv from rank 2, tag 1 (rank 3 of 4, gloo)"));
    REQUIRE(r.seconds < 5 + 10);
  }
}

TEST_CASE("clusters: mpirun across two hosts (network namespaces, no ssh) needs MASTER_ADDR, and then trains one job",
          "[comm][clusters][netns]") {
  if (!no_namespaces.empty()) {
    WARN("not run: " + no_namespaces);
    return;
  }
  test::remove_stale_namespaces();
  test::TwoHosts hosts;
  test::TempDir dir("brigade_mpirun_hosts");
  // Open MPI's "ssh" (plm_rsh_agent): start its daemon in the namespace of the host asked for, under
  // a host name of its own, as ssh would on another machine.
  const std::string agent = dir.file("agent");
  std::ofstream(agent) << "#!/bin/sh\nhost=$1; shift\ncase $host in 10.77.0.1) ns=" << hosts.a
                       << ";; 10.77.0.2) ns=" << hosts.b
                       << ";; *) echo \"agent: unknown host $host\" >&2; exit 1;; esac\n"
                          "exec ip netns exec $ns unshare --uts sh -c \"hostname $ns; $*\"\n";
  REQUIRE(chmod(agent.c_str(), 0755) == 0);
  const std::string mpirun = "ip netns exec " + hosts.a + " env " + kMpirun + "--mca plm_rsh_agent " + agent +
                             " --host 10.77.0.1:2,10.77.0.2:2 -n 4 ";

  // Nothing says where rank 0 is: every rank refuses before it waits, saying what to export.
  test::CommandResult r = run(mpirun + kTrain);
  INFO(r.output);
  REQUIRE(r.status != 0);
  REQUIRE(test::count(r.output, "the job spans several machines (2 of its 4 ranks on this one)") >= 1);
  REQUIRE_THAT(r.output, Contains("mpirun -x MASTER_ADDR="));
  REQUIRE(r.seconds < 10);

  // With MASTER_ADDR the port comes from the job's name; the losses are brigade launch's.
  test::CommandResult launched = run(kCli + " launch -n 4 -- " + kTrain);
  r = run(mpirun + "-x MASTER_ADDR=10.77.0.1 " + kTrain);
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE(test::count(r.output, "pipeline: 4 stages on 4 ranks (processes)") == 1);
  REQUIRE(test::lines_with(r.output, "loss=").size() == 2);
  REQUIRE(test::lines_with(r.output, "loss=") == test::lines_with(launched.output, "loss="));
}

// Runs the tests only where the cluster programs are installed, as root; else exit 77 (SKIP).
int main(int argc, char** argv) {
  std::string missing = test::SlurmCluster::missing_programs();
  if (test::run_command("command -v mpirun.openmpi").status != 0) missing += " mpirun.openmpi";
  if (!missing.empty() || geteuid() != 0) {
    std::cout << "SKIP: " << (geteuid() != 0 ? "needs root" : "missing: " + missing)
              << " (scripts/setup.sh installs slurm-wlm, munge and openmpi-bin)" << std::endl;
    return 77;
  }
  // Interrupted, kill every process below this one (the Slurm daemons have process groups of their
  // own; their steps come back here as orphans) and remove the namespaces and directories. Shell
  // builtins only, to be quick (no process per /proc entry); twice, for what forked meanwhile.
  const std::string me = std::to_string(getpid());
  test::clean_up_on_signal(
      "below() { local want=$1 s p line; for s in /proc/[0-9]*/stat; do p=${s#/proc/}; p=${p%/stat}; "
      "[ \"$p\" = $$ ] && continue; read -r line < $s 2>/dev/null || continue; set -- ${line##*) }; "
      "[ \"$2\" = \"$want\" ] && { below $p; kill -9 $p; }; done; }; below " + me + "; below " + me +
      "; for n in $(ip netns list | grep -o '^" + test::kPrefix + me + "-[^ ]*'); do ip netns del $n; done; rm -rf " +
      std::filesystem::temp_directory_path().string() + "/brigade_*_" + me + "_*");
  // Two hosts need `ip netns` (iproute2) and unshare; only that case is left out without them.
  const std::string probe = test::kPrefix + std::to_string(getpid()) + "-probe";
  test::CommandResult r = test::run_command("command -v unshare && ip netns add " + probe);
  if (r.status != 0) no_namespaces = "cannot create a network namespace here: " + r.output;
  test::remove_namespace(probe);
  return Catch::Session().run(argc, argv);
}
