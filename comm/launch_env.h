// Where this process sits in a multi-process job, read from the environment its launcher set.
//
// Three launchers are understood, and one function reads whichever is present:
//
//   brigade launch / torchrun   RANK, WORLD_SIZE, LOCAL_RANK (+ LOCAL_WORLD_SIZE), MASTER_ADDR/PORT
//   Slurm (srun)                SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (+ SLURM_NTASKS_PER_NODE,
//                               SLURM_JOB_NODELIST, SLURM_JOB_ID)
//   nothing                     a single process: rank 0 of 1
//
// RANK/WORLD_SIZE win when both kinds are present (torchrun started inside a Slurm allocation).
// How the ranks find each other — the rendezvous — comes from BRIGADE_COMM_STORE (a directory every
// rank can see) or MASTER_ADDR/MASTER_PORT (rank 0 serves a TCP store there). Under Slurm without
// either, the first node of the allocation serves on a port derived from the job id.
#pragma once

#include <functional>
#include <string>

namespace brigade::comm {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // rank among the processes on this machine: picks the GPU
  int local_world_size = 1;  // processes on this machine
  std::string launcher;      // "brigade launch", "torchrun", "slurm" or "none", for messages
  std::string store_dir;     // BRIGADE_COMM_STORE: a shared directory (FileStore), or empty
  std::string master_addr;   // the TCP store's host, or empty
  int master_port = 0;

  std::string str() const;  // "rank 2 of 4 (local rank 2 of 4, brigade launch; store: /tmp/x)"
};

using GetEnv = std::function<const char*(const char* name)>;  // like std::getenv: null when unset

// Throws an Error naming the variable when one is malformed or they contradict each other.
LaunchEnv read_launch_env(const GetEnv& getenv);
LaunchEnv read_launch_env();  // from this process's environment

// The first host of a Slurm node list: "gpu[07-09,12],cpu1" -> "gpu07".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace brigade::comm
