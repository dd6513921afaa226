#include "comm/launch_env.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace brigade::comm {

namespace {

bool is_set(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

int read_int(const GetEnv& getenv, const char* name, int fallback, int min_value) {
  if (!is_set(getenv, name)) return fallback;
  std::string text = getenv(name);
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  BRIGADE_CHECK(end == text.c_str() + text.size() && value >= min_value && value <= 1 << 30, "comm: ", name, "='",
                text, "' is not an integer >= ", min_value);
  return int(value);
}

// Slurm's tasks per node: "4", "2(x3)" (three nodes of 2), "2(x3),1": the first node's count.
int first_slurm_count(const std::string& text) { return std::atoi(text.c_str()); }

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
  bool torchrun_style = is_set(getenv, "RANK") || is_set(getenv, "WORLD_SIZE");
  bool slurm = is_set(getenv, "SLURM_PROCID") && is_set(getenv, "SLURM_NTASKS");
  if (torchrun_style) {
    BRIGADE_CHECK(is_set(getenv, "RANK") && is_set(getenv, "WORLD_SIZE"),
                  "comm: RANK and WORLD_SIZE must be set together (found only ",
                  is_set(getenv, "RANK") ? "RANK" : "WORLD_SIZE", ")");
    env.rank = read_int(getenv, "RANK", 0, 0);
    env.world_size = read_int(getenv, "WORLD_SIZE", 1, 1);
    env.local_rank = read_int(getenv, "LOCAL_RANK", env.rank, 0);
    env.local_world_size = read_int(getenv, "LOCAL_WORLD_SIZE", env.world_size, 1);
    env.launcher = is_set(getenv, "BRIGADE_LAUNCH") ? "brigade launch" : "torchrun";
    BRIGADE_CHECK(env.rank < env.world_size, "comm: RANK=", env.rank, " is not below WORLD_SIZE=", env.world_size);
  } else if (slurm) {
    env.rank = read_int(getenv, "SLURM_PROCID", 0, 0);
    env.world_size = read_int(getenv, "SLURM_NTASKS", 1, 1);
    env.local_rank = read_int(getenv, "SLURM_LOCALID", 0, 0);
    env.local_world_size =
        is_set(getenv, "SLURM_NTASKS_PER_NODE") ? first_slurm_count(getenv("SLURM_NTASKS_PER_NODE")) : 1;
    if (is_set(getenv, "SLURM_TASKS_PER_NODE") && !is_set(getenv, "SLURM_NTASKS_PER_NODE"))
      env.local_world_size = first_slurm_count(getenv("SLURM_TASKS_PER_NODE"));
    env.local_world_size = std::max(env.local_world_size, env.local_rank + 1);
    env.launcher = "slurm";
    BRIGADE_CHECK(env.rank < env.world_size, "comm: SLURM_PROCID=", env.rank, " is not below SLURM_NTASKS=",
                  env.world_size);
  } else {
    env.launcher = "none";
  }
  BRIGADE_CHECK(env.local_rank < env.local_world_size, "comm: the local rank ", env.local_rank,
                " is not below the local world size ", env.local_world_size);

  if (is_set(getenv, "BRIGADE_COMM_STORE")) env.store_dir = getenv("BRIGADE_COMM_STORE");
  if (is_set(getenv, "MASTER_ADDR")) env.master_addr = getenv("MASTER_ADDR");
  env.master_port = read_int(getenv, "MASTER_PORT", 0, 1);
  BRIGADE_CHECK(env.master_port <= 65535, "comm: MASTER_PORT=", env.master_port, " is not a TCP port");
  if (env.launcher == "slurm" && env.store_dir.empty()) {
    // Every task of the job computes the same address without talking to the others.
    if (env.master_addr.empty() && is_set(getenv, "SLURM_JOB_NODELIST"))
      env.master_addr = first_slurm_host(getenv("SLURM_JOB_NODELIST"));
    if (env.master_port == 0) env.master_port = 29500 + read_int(getenv, "SLURM_JOB_ID", 0, 0) % 1000;
  }
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
