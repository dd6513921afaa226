#include "comm/connect.h"

#include <unistd.h>

#include <cstdlib>

#include "comm/gloo.h"
#include "comm/nccl.h"
#include "comm/store.h"

namespace brigade::comm {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string gloo_host(const LaunchEnv& env, const ConnectOptions& options) {
  if (!options.gloo_host.empty()) return options.gloo_host;
  if (env.local_world_size >= env.world_size) return env_or("BRIGADE_GLOO_HOST", "127.0.0.1");
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return env_or("BRIGADE_GLOO_HOST", name);
}

}  // namespace

std::unique_ptr<Communicator> connect(const LaunchEnv& env, const ConnectOptions& options) {
  std::string backend = options.backend;
  if (backend == "auto") backend = options.device.is_cuda() ? "nccl" : "gloo";
  BRIGADE_CHECK(backend == "gloo" || backend == "nccl", "comm connect: unknown backend '", backend,
                "' (expected auto, gloo or nccl; local groups come from comm::local_group)");
  // Resolved once (it may read BRIGADE_CONNECT_TIMEOUT): the store and the backend get the same budget.
  const Milliseconds within = connect_timeout(options.timeout, options.connect_timeout);
  std::shared_ptr<Store> store = open_store(env, Deadline::after(within));
  if (backend == "nccl")
    return nccl_communicator(std::move(store), env.rank, env.world_size, options.device, options.timeout, within);
  BRIGADE_CHECK(options.device.is_cpu(), "comm connect: gloo moves CPU tensors, not ", options.device.str(),
                " (use the nccl backend for GPUs)");
  GlooOptions gloo;
  gloo.host = gloo_host(env, options);
  gloo.interface = env_or("BRIGADE_GLOO_IFACE", "");
  gloo.timeout = options.timeout;
  gloo.connect_timeout = within;
  return gloo_communicator(std::move(store), env.rank, env.world_size, gloo);
}

std::unique_ptr<Communicator> connect(const ConnectOptions& options) { return connect(read_launch_env(), options); }

Device local_device(const LaunchEnv& env) {
  int gpus = cuda_device_count();
  return gpus == 0 ? Device::cpu() : Device::cuda(env.local_rank % gpus);
}

Device local_device() { return local_device(read_launch_env()); }

}  // namespace brigade::comm
