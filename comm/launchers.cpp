#include "comm/launchers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace brigade::comm {

bool env_is_set(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

int env_int(const GetEnv& getenv, const char* name, int fallback, int min_value) {
  if (!env_is_set(getenv, name)) return fallback;
  std::string text = getenv(name);
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  BRIGADE_CHECK(end == text.c_str() + text.size() && value >= min_value && value <= 1 << 30, "comm: ", name, "='",
                text, "' is not an integer >= ", min_value);
  return int(value);
}

namespace {

// A launcher that numbers ranks with `rank_var` of `size_var`, and may say which of them share
// this machine (a null name: the launcher has no such variable). Absent (empty launcher name) when
// `rank_var` is unset.
LauncherPlace read_numbered(const GetEnv& getenv, const char* launcher, const char* rank_var, const char* size_var,
                            const char* local_rank_var, const char* local_size_var) {
  LauncherPlace p;
  if (!env_is_set(getenv, rank_var)) return p;
  p.launcher = launcher;
  p.rank_var = rank_var;
  p.size_var = size_var ? size_var : "";
  auto known = [&](const char* name) { return name != nullptr && env_is_set(getenv, name); };
  p.rank = env_int(getenv, rank_var, 0, 0);
  p.world_size = known(size_var) ? env_int(getenv, size_var, 0, 1) : 0;  // 0: the launcher did not say
  p.local_known = known(local_rank_var) && known(local_size_var);
  p.local_rank = p.local_known ? env_int(getenv, local_rank_var, 0, 0) : p.rank;
  p.local_world_size =
      p.local_known ? env_int(getenv, local_size_var, 1, 1) : std::max(p.world_size, p.local_rank + 1);
  BRIGADE_CHECK(p.world_size == 0 || p.rank < p.world_size, "comm: ", rank_var, "=", p.rank, " is not below ",
                size_var, "=", p.world_size);
  return p;
}

// Slurm's tasks per node: "4", "2(x3)" (three nodes of 2), "2(x3),1": the first node's count.
int first_slurm_count(const std::string& text) { return std::atoi(text.c_str()); }

LauncherPlace read_slurm(const GetEnv& getenv) {
  LauncherPlace p;
  if (!env_is_set(getenv, "SLURM_PROCID") || !env_is_set(getenv, "SLURM_NTASKS")) return p;
  // A batch script (sbatch) sees SLURM_PROCID=0 and the allocation's SLURM_NTASKS but no step: it is
  // one process, not task 0 of a step (seen under Slurm 22.05; srun sets SLURM_STEP_ID, older
  // versions SLURM_STEPID). Run there directly, the program is alone; started by srun, it is a task.
  if (!env_is_set(getenv, "SLURM_STEP_ID") && !env_is_set(getenv, "SLURM_STEPID")) return p;
  p.launcher = "slurm";
  p.rank_var = "SLURM_PROCID";
  p.size_var = "SLURM_NTASKS";
  p.rank = env_int(getenv, "SLURM_PROCID", 0, 0);
  p.world_size = env_int(getenv, "SLURM_NTASKS", 1, 1);
  p.local_rank = env_int(getenv, "SLURM_LOCALID", 0, 0);
  // The step's own layout first: SLURM_NTASKS_PER_NODE is the batch script's request, inherited by a
  // step that may ask for another (srun -N2 -n2 inside sbatch --ntasks-per-node=4).
  const char* per_node = env_is_set(getenv, "SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                         : env_is_set(getenv, "SLURM_TASKS_PER_NODE")    ? "SLURM_TASKS_PER_NODE"
                                                                         : nullptr;
  p.local_world_size = std::max(per_node ? first_slurm_count(getenv(per_node)) : 1, p.local_rank + 1);
  p.local_known = per_node != nullptr;
  if (env_is_set(getenv, "SLURM_JOB_ID")) {
    p.job_key_var = "SLURM_JOB_ID";
    p.job_key = getenv("SLURM_JOB_ID");
  }
  BRIGADE_CHECK(p.rank < p.world_size, "comm: SLURM_PROCID=", p.rank, " is not below SLURM_NTASKS=", p.world_size);
  return p;
}

// The start time of process `pid` (clock ticks since boot, /proc/PID/stat's 22nd field), so that a
// pid reused later names another process; "" when unreadable.
std::string start_time_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }
  return field;
}

void set_job_key(LauncherPlace& p, const GetEnv& getenv, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (env_is_set(getenv, name)) {
      p.job_key_var = name;
      p.job_key = getenv(name);
      return;
    }
}

}  // namespace

std::vector<LauncherPlace> read_launchers(const GetEnv& getenv) {
  std::vector<LauncherPlace> found;
  if (env_is_set(getenv, "RANK") || env_is_set(getenv, "WORLD_SIZE")) {
    BRIGADE_CHECK(env_is_set(getenv, "RANK") && env_is_set(getenv, "WORLD_SIZE"),
                  "comm: RANK and WORLD_SIZE must be set together (found only ",
                  env_is_set(getenv, "RANK") ? "RANK" : "WORLD_SIZE", ")");
    const char* name = env_is_set(getenv, "BRIGADE_LAUNCH") ? "brigade launch" : "torchrun";
    LauncherPlace p = read_numbered(getenv, name, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    // torchrun's defaults: LOCAL_RANK unset means one machine, LOCAL_WORLD_SIZE unset the whole job.
    p.local_rank = env_int(getenv, "LOCAL_RANK", p.rank, 0);
    p.local_world_size = env_int(getenv, "LOCAL_WORLD_SIZE", p.world_size, 1);
    p.local_known = true;
    found.push_back(p);
  }

  LauncherPlace ompi = read_numbered(getenv, "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
  set_job_key(ompi, getenv, {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"});
  if (!ompi.launcher.empty()) found.push_back(ompi);

  // MPICH's and Intel MPI's hydra say MPI_LOCALRANKID; Cray's PALS says PMI_LOCAL_RANK.
  const bool cray = env_is_set(getenv, "PMI_LOCAL_RANK");
  LauncherPlace pmi = read_numbered(getenv, "PMI", "PMI_RANK", "PMI_SIZE", cray ? "PMI_LOCAL_RANK" : "MPI_LOCALRANKID",
                                    cray ? "PMI_LOCAL_SIZE" : "MPI_LOCALNRANKS");
  set_job_key(pmi, getenv, {"PMI_JOBID", "PMIX_NAMESPACE", "PALS_APID"});
  if (!pmi.launcher.empty() && pmi.job_key.empty() && pmi.local_known && pmi.local_world_size == pmi.world_size) {
    // Hydra names no job in its ranks' environment. On one machine every rank of the job is a child
    // of the same hydra_pmi_proxy, so that process (pid and start time) names the job there. A
    // wrapper that does not `exec` the program breaks this; its ranks then fail to meet, bounded by
    // the connect timeout, and the error names the store they looked for.
    const pid_t parent = getppid();
    pmi.job_key = std::to_string(parent) + "@" + start_time_of(parent);
    pmi.job_key_var = "the parent process (hydra names no job)";
  }
  if (!pmi.launcher.empty()) found.push_back(pmi);

  // PMIx keeps the job's size behind its library; only the rank is in the environment.
  LauncherPlace pmix = read_numbered(getenv, "PMIx", "PMIX_RANK", nullptr, nullptr, nullptr);
  set_job_key(pmix, getenv, {"PMIX_NAMESPACE"});
  if (!pmix.launcher.empty()) found.push_back(pmix);

  LauncherPlace slurm = read_slurm(getenv);
  if (!slurm.launcher.empty()) found.push_back(slurm);
  return found;
}

}  // namespace brigade::comm
