#include "comm/connect.h"

#include <cstdlib>

#include "comm/address.h"
#include "comm/gloo.h"
#include "comm/nccl.h"
#include "comm/store.h"

namespace brigade::comm {

namespace {

const char* getenv_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// NCCL picks its own interfaces, and on a host with several it may pick one the other hosts cannot
// reach (a docker bridge, a management network): point it at the one gloo would use, the route to
// MASTER_ADDR, unless the user chose. "=eth0" means exactly eth0, not every name starting "eth0".
// Before the first NCCL call in this process, which is when NCCL reads it.
void hint_nccl_interface(const LaunchEnv& env) {
  if (getenv_or_null("NCCL_SOCKET_IFNAME") != nullptr || env.world_size == 1) return;
  try {
    AdvertisedAddress a = choose_address(env, getenv_or_null);
    if (!a.interface.empty() && !is_loopback(a.address)) setenv("NCCL_SOCKET_IFNAME", ("=" + a.interface).c_str(), 0);
  } catch (const Error&) {
    // Only a hint: without one NCCL chooses by itself, as it always did.
  }
}

}  // namespace

std::unique_ptr<Communicator> connect(const LaunchEnv& env, const ConnectOptions& options) {
  std::string backend = options.backend;
  if (backend == "auto") backend = options.device.is_cuda() ? "nccl" : "gloo";
  BRIGADE_CHECK(backend == "gloo" || backend == "nccl", "comm connect: unknown backend '", backend,
                "' (expected auto, gloo or nccl; local groups come from comm::local_group)");
  GlooOptions gloo;
  if (backend == "gloo") {
    BRIGADE_CHECK(options.device.is_cpu(), "comm connect: gloo moves CPU tensors, not ", options.device.str(),
                  " (use the nccl backend for GPUs)");
    // Chosen before anything waits, so a job that could never connect says why at once.
    gloo.host = options.gloo_host.empty() ? choose_address(env, getenv_or_null).address : options.gloo_host;
    gloo.timeout = options.timeout;
  }
  // One budget for the whole of connecting: the store's rendezvous and the backend's handshakes.
  const Deadline deadline = Deadline::after(connect_timeout(options.timeout, options.connect_timeout));
  std::shared_ptr<Store> store = open_store(env, deadline);
  if (backend == "nccl") {
    hint_nccl_interface(env);
    return nccl_communicator(std::move(store), env.rank, env.world_size, options.device, options.timeout,
                             deadline.remaining());
  }
  gloo.connect_timeout = deadline.remaining();
  return gloo_communicator(std::move(store), env.rank, env.world_size, gloo);
}

std::unique_ptr<Communicator> connect(const ConnectOptions& options) { return connect(read_launch_env(), options); }

Device local_device(const LaunchEnv& env) {
  int gpus = cuda_device_count();
  return gpus == 0 ? Device::cpu() : Device::cuda(env.local_rank % gpus);
}

Device local_device() { return local_device(read_launch_env()); }

}  // namespace brigade::comm
