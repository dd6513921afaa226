#include "generate/stages.h"

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/connect.h"
#include "comm/launch_env.h"
#include "comm/local.h"
#include "core/error.h"
#include "core/stream.h"

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
    rank_body(*world);
    return;
  }
  // One process: every rank a thread (on a GPU each on a stream of its own). Written here, small,
  // until a library runner of local ranks replaces it and train's copy alike.
  auto world = comm::local_group(std::vector<Device>(size_t(P), device));
  std::vector<std::string> errors(static_cast<size_t>(P));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      try {
        Stream stream;
        std::optional<StreamGuard> on_stream;
        if (device.is_cuda()) {
          stream = Stream::create(device);
          on_stream.emplace(stream);
        }
        rank_body(*world[size_t(r)]);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
        world[size_t(r)]->abort("rank " + std::to_string(r) + " failed: " + e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The first rank that failed on its own (not because another aborted) has the real story.
  for (const std::string& e : errors)
    if (!e.empty() && e.find("abort") == std::string::npos) fail(e);
  for (const std::string& e : errors)
    if (!e.empty()) fail(e);
}

}  // namespace brigade::generate_cli
