// Where this process sits in a multi-process job, read from the environment its launcher set.
//
// One function reads whichever launcher's variables are present (comm/launchers.h lists them):
//
//   brigade launch / torchrun   RANK, WORLD_SIZE, LOCAL_RANK (+ LOCAL_WORLD_SIZE), MASTER_ADDR/PORT
//   Open MPI, MPICH, Intel MPI  OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE; PMI_RANK, PMI_SIZE,
//   (mpirun, mpiexec), PMIx     MPI_LOCALRANKID, MPI_LOCALNRANKS; PMIX_RANK
//   Slurm (srun)                SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (+ SLURM_NTASKS_PER_NODE,
//                               SLURM_JOB_NODELIST, SLURM_JOB_ID)
//   nothing                     a single process: rank 0 of 1
//
// RANK/WORLD_SIZE win when several kinds are present (torchrun started inside a Slurm allocation),
// then the MPI launchers, then Slurm. A process that one launcher calls alone while another counts
// more processes is refused: it would silently train as an independent job.
//
// How the ranks find each other — the rendezvous — comes from BRIGADE_COMM_STORE (a directory every
// rank can see) or MASTER_ADDR/MASTER_PORT (rank 0 serves a TCP store there). Without either, under
// Slurm the first node of the allocation serves on a port derived from the job id; under an MPI
// launcher whose ranks are all on this machine, 127.0.0.1 on a port derived from the job's name
// (PMIX_NAMESPACE, ...). An MPI job across machines without MASTER_ADDR is refused, saying what to set.
#pragma once

#include <functional>
#include <string>

namespace brigade::comm {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // rank among the processes on this machine: picks the GPU
  int local_world_size = 1;  // processes on this machine
  std::string launcher;      // "brigade launch", "torchrun", "Open MPI", "PMI", "PMIx", "slurm" or "none"
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
