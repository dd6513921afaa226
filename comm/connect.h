// connect(): join the job this process was launched into.
//
//   // started by `brigade launch -n 4 -- ./train`, torchrun, or srun:
//   auto comm = comm::connect();          // gloo: CPU tensors
//
//   comm::ConnectOptions options;
//   options.device = comm::local_device();  // this rank's GPU
//   auto comm = comm::connect(options);   // nccl
//
// It reads the launch environment (launch_env.h), opens the rendezvous store it names (store.h) and
// creates the backend's communicator; every rank of the job must call it.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/launch_env.h"

namespace brigade::comm {

struct ConnectOptions {
  // "auto": nccl for a GPU device, gloo for the CPU. Or "gloo" / "nccl" explicitly.
  std::string backend = "auto";
  Device device = Device::cpu();
  Milliseconds timeout = default_timeout();     // each communication call
  std::optional<Milliseconds> connect_timeout;  // meeting the other ranks; unset: see comm/timeout.h
  // gloo: the address this rank listens on and advertises. Empty: chosen by comm/address.h (the
  // route to MASTER_ADDR, unless BRIGADE_GLOO_IFACE / BRIGADE_GLOO_HOST say otherwise).
  std::string gloo_host;
};

std::unique_ptr<Communicator> connect(const ConnectOptions& options = {});
std::unique_ptr<Communicator> connect(const LaunchEnv& env, const ConnectOptions& options);

// The GPU this rank should use: cuda:(LOCAL_RANK mod GPUs), or the CPU on a machine without GPUs.
Device local_device(const LaunchEnv& env);
Device local_device();

}  // namespace brigade::comm
