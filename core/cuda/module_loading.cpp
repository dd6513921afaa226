#include "core/cuda/module_loading.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <mutex>

#include "core/error.h"

namespace brigade::cuda {

ModuleLoading module_loading() {
  // The mode is fixed once CUDA has started, so the driver is asked once.
  static ModuleLoading mode = ModuleLoading::lazy;
  static std::once_flag once;
  std::call_once(once, [] {
    using GetLoadingMode = CUresult (*)(CUmoduleLoadingMode*);
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult status{};
    // cuModuleGetLoadingMode exists since CUDA 11.7, where lazy loading came in.
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &pointer, 11070, cudaEnableDefault, &status);
    BRIGADE_CHECK(e == cudaSuccess && status == cudaDriverEntryPointSuccess && pointer != nullptr,
                  "the CUDA driver has no cuModuleGetLoadingMode (cudaGetDriverEntryPointByVersion: ",
                  cudaGetErrorString(e), ", query result ", int(status), ")");
    CUmoduleLoadingMode got{};
    const CUresult r = reinterpret_cast<GetLoadingMode>(pointer)(&got);
    BRIGADE_CHECK(r == CUDA_SUCCESS, "cuModuleGetLoadingMode failed with CUresult ", int(r));
    mode = got == CU_MODULE_EAGER_LOADING ? ModuleLoading::eager : ModuleLoading::lazy;
  });
  return mode;
}

}  // namespace brigade::cuda
