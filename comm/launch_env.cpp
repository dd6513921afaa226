#include "comm/launch_env.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "comm/launchers.h"
#include "core/error.h"

namespace brigade::comm {

namespace {

bool is_mpi(const LauncherPlace& p) { return p.launcher == "Open MPI" || p.launcher == "PMI" || p.launcher == "PMIx"; }

// The launcher believed (launchers.h gives the order). An MPI launcher whose rank agrees with
// Slurm's is Slurm's own (srun --mpi=pmi2 or pmix): Slurm's variables say more, the node list.
const LauncherPlace& believed(const std::vector<LauncherPlace>& places) {
  const LauncherPlace& first = places.front();
  for (const LauncherPlace& p : places)
    if (is_mpi(first) && p.launcher == "slurm" && p.rank == first.rank &&
        (first.world_size == 0 || first.world_size == p.world_size))
      return p;
  BRIGADE_CHECK(first.world_size > 0, "comm: ", first.rank_var, "=", first.rank, " is set (", first.launcher,
                ") but no variable gives the job's size (", first.launcher,
                " keeps it in its library): set RANK (=$", first.rank_var,
                ") and WORLD_SIZE for every process, or launch with srun or Open MPI's mpirun, whose variables give it");
  return first;
}

// Four processes that each think they are alone train four independent jobs and print four sets of
// results, with nothing to say it went wrong: refuse, naming both launchers' variables.
void refuse_independent_jobs(const LauncherPlace& chosen, const std::vector<LauncherPlace>& places) {
  for (const LauncherPlace& p : places) {
    if (&p == &chosen || p.world_size <= 1) continue;
    BRIGADE_CHECK(chosen.world_size != 1, "comm: ", chosen.size_var, "=1 (", chosen.launcher,
                  ") says this process runs alone, but ", p.size_var, "=", p.world_size, " (", p.launcher,
                  ") says it is one of ", p.world_size,
                  " processes: each would run as an independent job. Run the program under that launcher without "
                  "setting ",
                  chosen.size_var, ", or unset ", p.size_var, " if this process is meant to run alone");
    // `srun -n 2 brigade launch -n 4` (or `srun -n 2 torchrun --nproc_per_node 4`): each of the two
    // launchers starts a job of its own unless they were told of each other (--nnodes 2), which makes
    // WORLD_SIZE / LOCAL_WORLD_SIZE their number. torchrun's variables set by hand to the outer
    // launcher's own (RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS) describe that one world and pass.
    const bool nesting_launcher = chosen.launcher == "brigade launch" || chosen.launcher == "torchrun";
    const bool same_world = chosen.launcher == "torchrun" && chosen.world_size == p.world_size && chosen.rank == p.rank;
    const int launchers = chosen.world_size / std::max(chosen.local_world_size, 1);
    BRIGADE_CHECK(!nesting_launcher || launchers == p.world_size || same_world, "comm: ",
                  p.size_var, "=", p.world_size, " (", p.launcher, ") started ", p.world_size, " copies of ",
                  chosen.launcher, ", but each runs a job of its own (--nnodes ", launchers, "): they would train independently. Tell them of each other with --nnodes ", p.world_size,
                  chosen.launcher == "torchrun" ? " --node_rank $" : " --node-rank $", p.rank_var,
                  chosen.launcher == "torchrun" ? " --master_addr <the first one's host> --master_port <a free port>"
                                                : " --master-addr <the first one's host> --master-port <a free port>",
                  ", or let ", p.launcher, " start the program directly");
    return;
  }
}

// A TCP port every rank of one job computes alike from the job's name (FNV-1a: the same in every
// build), below Linux's ephemeral range (32768 and up) so that it is not some connection's port.
int port_from_job_key(const std::string& key) {
  uint32_t h = 2166136261u;
  for (unsigned char c : key) h = (h ^ c) * 16777619u;
  return 20000 + int(h % 10000);
}

// Under mpirun nothing in the environment says where rank 0 runs. On one machine it is here; across
// machines the user must say (MASTER_ADDR), and is told so before anything waits.
void choose_mpi_rendezvous(const LauncherPlace& p, LaunchEnv& env) {
  if (!env.store_dir.empty() || env.world_size == 1) return;
  const bool one_machine = p.local_known && p.local_world_size == p.world_size;
  if (env.master_addr.empty() && one_machine) env.master_addr = "127.0.0.1";
  if (!env.master_addr.empty() && env.master_port == 0 && !p.job_key.empty())
    env.master_port = port_from_job_key(p.job_key);
  if (!env.master_addr.empty() && env.master_port != 0) return;
  const std::string why = !env.master_addr.empty() ? "MASTER_ADDR is set, but nothing names the job to derive a port from"
                          : !p.local_known        ? p.launcher + " does not say which ranks share a machine"
                          : !one_machine ? "the job spans several machines (" + std::to_string(p.local_world_size) +
                                               " of its " + std::to_string(p.world_size) + " ranks on this one)"
                                         : "nothing names the job to derive a port from";
  BRIGADE_CHECK(false, "comm: ", env.str(), ": ", why, ", and ", p.launcher,
                "'s environment does not say where rank 0 runs: export MASTER_ADDR=<rank 0's host> and "
                "MASTER_PORT=<a free port> to every rank (Open MPI: mpirun -x MASTER_ADDR=node0 -x MASTER_PORT=29400; "
                "MPICH, Intel MPI: mpiexec -genv MASTER_ADDR node0 -genv MASTER_PORT 29400), or BRIGADE_COMM_STORE="
                "<a directory every host sees>");
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // Up to the first top-level comma; a bracket holds ranges, of which the first start is taken.
  std::string host;
  for (size_t i = 0; i < nodelist.size(); ++i) {
    char c = nodelist[i];
    if (c == ',') break;
    if (c != '[') {
      host += c;
      continue;
    }
    size_t close = nodelist.find(']', i);
    BRIGADE_CHECK(close != std::string::npos, "comm: malformed SLURM_JOB_NODELIST '", nodelist, "'");
    std::string ranges = nodelist.substr(i + 1, close - i - 1);
    host += ranges.substr(0, ranges.find_first_of(",-"));
    i = close;
  }
  BRIGADE_CHECK(!host.empty(), "comm: empty SLURM_JOB_NODELIST");
  return host;
}

LaunchEnv read_launch_env(const GetEnv& getenv) {
  LaunchEnv env;
  const std::vector<LauncherPlace> places = read_launchers(getenv);
  const LauncherPlace* chosen = places.empty() ? nullptr : &believed(places);
  if (chosen != nullptr) {
    refuse_independent_jobs(*chosen, places);
    env.rank = chosen->rank;
    env.world_size = chosen->world_size;
    env.local_rank = chosen->local_rank;
    env.local_world_size = chosen->local_world_size;
    env.launcher = chosen->launcher;
  } else {
    env.launcher = "none";
  }
  BRIGADE_CHECK(env.local_rank < env.local_world_size, "comm: the local rank ", env.local_rank,
                " is not below the local world size ", env.local_world_size);

  if (env_is_set(getenv, "BRIGADE_COMM_STORE")) env.store_dir = getenv("BRIGADE_COMM_STORE");
  if (env_is_set(getenv, "MASTER_ADDR")) env.master_addr = getenv("MASTER_ADDR");
  env.master_port = env_int(getenv, "MASTER_PORT", 0, 1);
  BRIGADE_CHECK(env.master_port <= 65535, "comm: MASTER_PORT=", env.master_port, " is not a TCP port");
  if (env.launcher == "slurm" && env.store_dir.empty() && env.world_size > 1) {
    // Every task of the step computes the same address without talking to the others: the step's
    // own first node (a step need not use the allocation's first node: srun -w, -r), and a port with
    // the step id in it, so that two steps side by side (srun ... & srun ... &) never meet at one
    // address (101 is prime to 1000: steps 0-999 of a job get distinct ports). Slurm's special step
    // ids (batch, extern: 2^32 - 2, ...) are large, hence unsigned arithmetic.
    const char* nodes = env_is_set(getenv, "SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    if (env.master_addr.empty() && env_is_set(getenv, nodes)) env.master_addr = first_slurm_host(getenv(nodes));
    const char* step_var = env_is_set(getenv, "SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID";
    const unsigned long long step = env_is_set(getenv, step_var) ? std::strtoull(getenv(step_var), nullptr, 10) : 0;
    const unsigned long long job = unsigned(env_int(getenv, "SLURM_JOB_ID", 0, 0));
    if (env.master_port == 0) env.master_port = 29500 + int((job + 101 * (step % 1000)) % 1000);
  }
  if (chosen != nullptr && is_mpi(*chosen)) choose_mpi_rendezvous(*chosen, env);
  BRIGADE_CHECK(env.master_addr.empty() == (env.master_port == 0) || !env.store_dir.empty(),
                "comm: MASTER_ADDR and MASTER_PORT must be set together");
  return env;
}

LaunchEnv read_launch_env() {
  return read_launch_env([](const char* name) -> const char* { return std::getenv(name); });
}

std::string LaunchEnv::str() const {
  std::string s = "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local rank " +
                  std::to_string(local_rank) + " of " + std::to_string(local_world_size) + ", " + launcher;
  if (!store_dir.empty()) s += "; store: " + store_dir;
  else if (!master_addr.empty()) s += "; store: " + master_addr + ":" + std::to_string(master_port);
  return s + ")";
}

}  // namespace brigade::comm
