// The emulator's launch counter: what the host asked of the devices, by name, and how often it
// waited for them — how many launches a training step costs (docs/cuda.md, "Launches per step").
// Counted where the runtime issues work to a stream (streams.cpp), so every kernel, library call,
// copy and graph replay is seen; brigade code reaches it only in emulator builds
// (BRIGADE_CUDA_EMULATOR), e.g. `brigade bench step` and tests/gpu/test_gpu_step_launches.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace brigade::emu {

// Everything since the last reset_launch_counts(), all devices and host threads together. Work
// recorded into a graph under capture is not counted (nothing was issued); each replay counts once,
// as one cudaGraphLaunch, the way a GPU's host sees it.
struct LaunchCounts {
  uint64_t kernels = 0;         // <<<...>>> launches (and cudaLaunchKernel)
  uint64_t library_calls = 0;   // cuBLAS and cuDNN calls that queue work
  uint64_t communication = 0;   // NCCL operations (a group counts once)
  uint64_t copies = 0;          // cudaMemcpy* and cudaMemset*
  uint64_t graph_launches = 0;  // cudaGraphLaunch
  uint64_t host_syncs = 0;      // the host waited for the device: a synchronize call or a blocking copy
  // Per name: a kernel's name ("adamw_multi_tensor_kernel<float, float>"), or the library's or
  // runtime's call ("cublasGemmEx", "cudaMemcpyAsync", "cudaGraphLaunch").
  std::map<std::string, uint64_t> by_name;
  std::map<std::string, uint64_t> syncs_by_call;  // "cudaStreamSynchronize", "cudaMemcpy", ...

  uint64_t launches() const;  // everything issued: kernels + library calls + communication + copies + graphs
};
LaunchCounts launch_counts();
void reset_launch_counts();

// For the runtime itself: `what` (enqueue's name for the work) was issued, or the host waited in `call`.
void count_issued(const std::string& what);
void count_host_sync(const std::string& call);
// The name `what` is counted under: a kernel's name without its launch configuration, or the call.
std::string launch_name(const std::string& what);

}  // namespace brigade::emu
