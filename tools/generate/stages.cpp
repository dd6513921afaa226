#include "generate/stages.h"

#include <string>
#include <vector>

#include "comm/connect.h"
#include "comm/launch_env.h"
#include "comm/local.h"
#include "comm/local_ranks.h"
#include "core/error.h"

namespace brigade::generate_cli {

void generate_on_stages(const GenerateOptions& o, Device device,
                        const std::function<void(comm::Communicator&)>& rank_body) {
  const int P = int(o.stages);
  const comm::LaunchEnv env = comm::read_launch_env();
  if (env.world_size > 1) {
    BRIGADE_CHECK(env.world_size == P, "brigade generate: launched as ", env.world_size, " processes but --stages ", P,
                  ": one process per stage (brigade launch -n ", P, ")");
    comm::ConnectOptions connect;
    connect.device = device.is_cuda() ? comm::local_device(env) : Device::cpu();
    auto world = comm::connect(env, connect);
    try {
      rank_body(*world);
    } catch (const std::exception& e) {
      // A rank that fails reading its part must not leave the others waiting out the timeout.
      world->abort("rank " + std::to_string(env.rank) + " failed: " + e.what());
      throw;
    }
    return;
  }
  // One process: every rank a thread, each on a stream of its own on a GPU (comm/local_ranks.h).
  auto world = comm::local_group(std::vector<Device>(size_t(P), device));
  comm::run_local_ranks(world, rank_body);
}

}  // namespace brigade::generate_cli
