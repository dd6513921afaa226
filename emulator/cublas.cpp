// The CUDA emulator's cuBLAS, part 1: the library context (the handle) and the helper functions.
//
// A -Dgpu_emulator=true build links these files instead of libcublas. The declarations come from the
// toolkit's cublas_v2.h, so every signature is checked against the real one, and brigade's call sites
// (kernels/cuda/gemm_cublas.cpp, bench/ceilings.cpp) compile and run unchanged.
//
// What a handle models (cuBLAS docs, 2.1.2 "cuBLAS Context" and 2.4 "cuBLAS Helper Function
// Reference"): the device current at cublasCreate, the stream work is queued on (the legacy default
// stream until cublasSetStream), a user workspace (cublasSetStream drops it again), the pointer mode
// that says where alpha and beta live, and the math mode. A handle is remembered while it lives, so a
// destroyed or made-up handle is CUBLAS_STATUS_NOT_INITIALIZED rather than a crash.
//
// What it does not model: the default workspace pool (the emulated GEMMs need no scratch memory, so
// none is allocated), atomics mode, SM count targets, the emulation-strategy knobs and logging.
// cublasDestroy does not synchronise the device as the real one does: queued work holds copies of
// everything it needs from the handle, so destroying it early is harmless here.
//
// The GEMMs are in cublas_gemm.cpp (validation), cublas_gemm_arithmetic.cpp and cublas_entry_points.cpp.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstdint>
#include <mutex>
#include <set>

#include "emulator/runtime.h"

// cuBLAS's opaque context: what cublasHandle_t points to.
struct cublasContext {
  int device = 0;                 // current at cublasCreate; the handle's for its whole life
  cudaStream_t stream = nullptr;  // the legacy default stream until cublasSetStream
  void* workspace = nullptr;      // nullptr: the library's default pool
  size_t workspace_bytes = 0;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace brigade::emu {
namespace {

struct Handles {
  std::mutex mutex;
  std::set<const cublasContext*> live;
};

Handles& handles() {
  static Handles* h = new Handles;  // never destroyed: handles may be destroyed by static destructors
  return *h;
}

// Runs `f` on the handle's state under the registry lock; NOT_INITIALIZED for a null, destroyed or
// made-up handle (cuBLAS docs, 2.1.1 "Error Status": "the cuBLAS library was not initialized").
template <typename F>
cublasStatus_t with_handle(cublasHandle_t handle, F f) {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  if (handle == nullptr || h.live.count(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  return f(*handle);
}

// The math modes of cublasMath_t (cuBLAS docs, 2.2.11 cublasMath_t): one base mode, optionally with
// the DISALLOW_REDUCED_PRECISION_REDUCTION flag or-ed in.
bool valid_math_mode(int mode) {
  const int base = mode & ~int(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  switch (base) {
    case CUBLAS_DEFAULT_MATH:
    case CUBLAS_TENSOR_OP_MATH:
    case CUBLAS_PEDANTIC_MATH:
    case CUBLAS_TF32_TENSOR_OP_MATH:
    case CUBLAS_FP32_EMULATED_BF16X9_MATH:
    case CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH: return true;
    default: return false;
  }
}

}  // namespace

// What cublas_gemm.cpp needs of a handle, copied under the lock so a GEMM sees one consistent state.
// NOT_INITIALIZED for a handle that is not live.
cublasStatus_t cublas_handle_state(cublasHandle_t handle, int* device, cudaStream_t* stream,
                                   cublasPointerMode_t* pointer_mode, cublasMath_t* math_mode) {
  return with_handle(handle, [&](const cublasContext& c) {
    *device = c.device;
    *stream = c.stream;
    *pointer_mode = c.pointer_mode;
    *math_mode = c.math_mode;
    return CUBLAS_STATUS_SUCCESS;
  });
}

}  // namespace brigade::emu

using namespace brigade::emu;

// ---- creating and destroying ---------------------------------------------------------------------

// cuBLAS docs, 2.4.1 cublasCreate(): initialises the library on the current device. INVALID_VALUE for
// a null `handle`; NOT_INITIALIZED when the CUDA runtime has no device to initialise.
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* context = new cublasContext;
  context->device = current_device();  // 2.1.2: a context is tied to the device current now
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.live.insert(context);
  *handle = context;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, 2.4.2 cublasDestroy(): releases the context. NOT_INITIALIZED for a handle that is not
// live (null, or destroyed already).
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  if (handle == nullptr || h.live.erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- versions ------------------------------------------------------------------------------------

// cuBLAS docs, 2.4.3 cublasGetVersion(): the version of the header this emulation was compiled
// against (CUBLAS_VERSION, major * 10000 + minor * 100 + patch). The docs give NOT_INITIALIZED for a
// null `version` ("the provided storage ... was not initialized"); the handle is not consulted.
cublasStatus_t cublasGetVersion_v2(cublasHandle_t, int* version) {
  if (version == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, 2.4.4 cublasGetProperty(): major, minor or patch of the version above.
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

// cuBLAS docs, cublasGetCudartVersion(): the CUDA runtime version the library was built with.
size_t cublasGetCudartVersion(void) { return CUDART_VERSION; }

// ---- status texts --------------------------------------------------------------------------------

// cuBLAS docs, 2.4.5 cublasGetStatusName(): the enumerator's name.
const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// cuBLAS docs, 2.4.6 cublasGetStatusString(): what the status means, after 2.2.1 cublasStatus_t.
const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the cuBLAS library was not initialized (no live handle)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed inside the cuBLAS library";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires a feature absent from the device architecture";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal cuBLAS operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires a license";
  }
  return "unknown cuBLAS status";
}

// ---- stream and workspace ------------------------------------------------------------------------

// cuBLAS docs, 2.4.7 cublasSetStream(): later calls queue their work on `stream`; it also
// unconditionally resets the workspace to the default pool (why brigade sets its own after it).
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  return with_handle(handle, [&](cublasContext& c) {
    c.stream = stream;
    c.workspace = nullptr;
    c.workspace_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
  });
}

// cuBLAS docs, 2.4.9 cublasGetStream().
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  return with_handle(handle, [&](const cublasContext& c) {
    if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *stream = c.stream;
    return CUBLAS_STATUS_SUCCESS;
  });
}

// cuBLAS docs, 2.4.8 cublasSetWorkspace(): a user-owned device buffer for later calls on the current
// stream. "The workspace pointer has to be aligned to at least 256 bytes, otherwise
// CUBLAS_STATUS_INVALID_VALUE error is returned." (nullptr with size 0 gives the library none.)
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  return with_handle(handle, [&](cublasContext& c) {
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
    c.workspace = workspace;
    c.workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
  });
}

// ---- pointer and math modes ----------------------------------------------------------------------

// cuBLAS docs, 2.4.10 cublasGetPointerMode().
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  return with_handle(handle, [&](const cublasContext& c) {
    if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = c.pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
  });
}

// cuBLAS docs, 2.4.11 cublasSetPointerMode() and 2.1.5 "Scalar Parameters": whether alpha and beta
// are read from host memory at the call (HOST, the default) or from device memory when the work
// runs (DEVICE).
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  return with_handle(handle, [&](cublasContext& c) {
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
    c.pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
  });
}

// cuBLAS docs, cublasGetMathMode() (2.4 "Helper Function Reference").
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  return with_handle(handle, [&](const cublasContext& c) {
    if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = c.math_mode;
    return CUBLAS_STATUS_SUCCESS;
  });
}

// cuBLAS docs, cublasSetMathMode() (2.4 "Helper Function Reference") and 2.2.11 cublasMath_t: any base
// mode, or-ed with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION or not; anything else is
// INVALID_VALUE. The emulated GEMMs always reduce in the compute type, so that flag changes nothing
// here; TF32_TENSOR_OP_MATH and TENSOR_OP_MATH change how f32 inputs are rounded (cublas_gemm.cpp).
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  return with_handle(handle, [&](cublasContext& c) {
    if (!valid_math_mode(int(mode))) return CUBLAS_STATUS_INVALID_VALUE;
    c.math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
  });
}
