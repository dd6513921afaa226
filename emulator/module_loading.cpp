// Module loading in the emulator. CUDA loads a program's kernels eagerly, when CUDA starts, or lazily,
// at each kernel's first launch, as CUDA_MODULE_LOADING says (EAGER or LAZY; unset is LAZY, the default
// on Linux since CUDA 12.2). The driver reads the variable once, when CUDA starts; the emulator reads
// it at its first question, which comes before any launch.
//
// What lazy loading changes for a program, per the CUDA Programming Guide ("Lazy Loading", potential
// hazards): loading a kernel may need the context to be idle, so the first launch of a kernel can wait
// on the host for work already running — also work that waits for the launching thread. The emulator
// takes the "may" as "does": the first launch of each kernel on a device waits, on the host, until
// every stream of that device has run what was issued to it. That makes the hazard reproducible: two
// NCCL ranks of one process on one GPU hang here as they did on an H200.
//
// Not modelled: a first launch during stream capture (the kernel is marked loaded, with no wait: the
// documentation says nothing of loading during capture), and cuBLAS's and cuDNN's own kernels (the
// emulator's libraries launch none).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "emulator/runtime.h"
#include "emulator/streams.h"

namespace brigade::emu {
namespace {

bool read_lazy() {
  const char* v = std::getenv("CUDA_MODULE_LOADING");
  return v == nullptr || std::strcmp(v, "EAGER") != 0;
}

bool lazy() {
  static const bool value = read_lazy();
  return value;
}

}  // namespace

CUresult CUDAAPI module_loading_mode(CUmoduleLoadingMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *mode = lazy() ? CU_MODULE_LAZY_LOADING : CU_MODULE_EAGER_LOADING;
  return CUDA_SUCCESS;
}

void load_on_first_launch(const char* kernel, cudaStream_t stream) {
  if (!lazy()) return;
  const int device = stream_device(stream);
  {
    static std::mutex mutex;
    static std::set<std::pair<std::string, int>> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (!loaded.emplace(kernel, device).second) return;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess && capture != cudaStreamCaptureStatusNone) return;
  synchronize_device(device);
}

}  // namespace brigade::emu
