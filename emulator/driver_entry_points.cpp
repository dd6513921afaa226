// cudaGetDriverEntryPoint(ByVersion): how a program reaches a CUDA driver function without linking
// libcuda (brigade's rule: binaries start on machines without a driver). The runtime's documentation
// (cuda_runtime_api.h): cudaSuccess with the function for a symbol it has, cudaSuccess with a null
// pointer and cudaDriverEntryPointSymbolNotFound for one it does not, cudaErrorInvalidValue for a
// version newer than the driver's. The emulator's driver has two functions: cuTensorMapEncodeTiled
// (emulator/tensor_maps.cpp), from CUDA 12.0, and cuModuleGetLoadingMode (module_loading.cpp),
// from CUDA 11.7.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

namespace brigade::emu {
CUresult CUDAAPI encode_tensor_map_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* global,
                                         const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                         const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                         CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                         CUtensorMapFloatOOBfill fill);
CUresult CUDAAPI module_loading_mode(CUmoduleLoadingMode* mode);  // module_loading.cpp
}  // namespace brigade::emu

namespace {

constexpr unsigned kDriverVersion = CUDA_VERSION;  // the toolkit the emulator is built against

cudaError_t look_up(const char* symbol, void** function, unsigned version, cudaDriverEntryPointQueryResult* status) {
  if (symbol == nullptr || function == nullptr) return cudaErrorInvalidValue;
  if (version > kDriverVersion) return cudaErrorInvalidValue;
  *function = nullptr;
  cudaDriverEntryPointQueryResult result = cudaDriverEntryPointSymbolNotFound;
  // Each function from the CUDA version that brought it in.
  const struct {
    const char* name;
    unsigned since;
    void* function;
  } functions[] = {
      {"cuTensorMapEncodeTiled", 12000, reinterpret_cast<void*>(&brigade::emu::encode_tensor_map_tiled)},
      {"cuModuleGetLoadingMode", 11070, reinterpret_cast<void*>(&brigade::emu::module_loading_mode)},
  };
  for (const auto& f : functions) {
    if (std::strcmp(symbol, f.name) != 0) continue;
    if (version >= f.since) {
      *function = f.function;
      result = cudaDriverEntryPointSuccess;
    } else {
      result = cudaDriverEntryPointVersionNotSufficent;
    }
  }
  if (status) *status = result;
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function, unsigned version,
                                             unsigned long long /*flags*/, cudaDriverEntryPointQueryResult* status) {
  return look_up(symbol, function, version, status);
}

// The unversioned form gives the newest version of the function.
cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long /*flags*/,
                                    cudaDriverEntryPointQueryResult* status) {
  return look_up(symbol, function, kDriverVersion, status);
}

}  // extern "C"
