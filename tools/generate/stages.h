// Where `brigade generate --stages P` runs its ranks: P threads of this process (each with a
// communicator of comm/local.h), or, started by `brigade launch -n P` (or torchrun, srun), this
// process as one rank of P, over gloo on CPUs — the world and rank found as `brigade train` finds them
// (comm::read_launch_env, comm::connect).
#pragma once

#include <functional>

#include "comm/communicator.h"
#include "core/device.h"
#include "generate/options.h"

namespace brigade::generate_cli {

// Runs `rank_body` once per rank, on `device` (a process of a launch takes its GPU from the launch
// environment when `device` is a GPU). Throws the error of the rank that failed first on its own (not
// because another aborted); a launch of other than P processes is an error naming both.
void generate_on_stages(const GenerateOptions& options, Device device,
                        const std::function<void(comm::Communicator&)>& rank_body);

}  // namespace brigade::generate_cli
