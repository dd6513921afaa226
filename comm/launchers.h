// What each launcher's variables say about this process's place in the job: one reader per
// launcher, used by launch_env.cpp (which picks one and decides the rendezvous). Internal to comm/.
//
//   torchrun / brigade launch   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   Open MPI (mpirun)           OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   PMI (MPICH and Intel MPI's  PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//        mpiexec, srun --mpi=pmi2; Cray's PMI_LOCAL_RANK, PMI_LOCAL_SIZE)
//   PMIx (prterun, srun --mpi=pmix)  PMIX_RANK (PMIx gives no size in the environment)
//   Slurm (srun)                SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_[N]TASKS_PER_NODE
#pragma once

#include <string>
#include <vector>

#include "comm/launch_env.h"

namespace brigade::comm {

struct LauncherPlace {
  std::string launcher;  // "torchrun", "brigade launch", "Open MPI", "PMI", "PMIx", "slurm"
  std::string rank_var, size_var;  // the variables read, for messages: "OMPI_COMM_WORLD_RANK", ...
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  bool local_known = false;  // whether the launcher said how many of the job's ranks share this machine
  std::string job_key;       // names this job, the same in every rank of it ("" if the launcher gives none)
  std::string job_key_var;   // the variable it came from
};

// Every launcher whose variables are present, in the order they are believed: torchrun's (set on
// purpose, also inside an allocation), then the MPI launchers, then Slurm's. MPI before Slurm
// because `mpirun` inside a Slurm allocation hands its ranks the SLURM_* variables of the
// allocation or of its own daemons, which do not describe the MPI ranks; under `srun --mpi=...`
// the two agree. Throws an Error naming the variable when one is malformed.
std::vector<LauncherPlace> read_launchers(const GetEnv& getenv);

bool env_is_set(const GetEnv& getenv, const char* name);  // set and not empty
// The variable as an integer >= min_value, or `fallback` when unset; an Error naming it otherwise.
int env_int(const GetEnv& getenv, const char* name, int fallback, int min_value);

}  // namespace brigade::comm
