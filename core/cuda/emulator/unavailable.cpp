// What the CUDA emulator cannot run: cuBLAS, a vendor library. matmul's automatic choice is the tiled
// GEMM here (kernels/cuda/matmul.cpp); asking for cuBLAS by name is an error that says why.
#include "core/error.h"
#include "kernels/cuda/gemm.h"

namespace brigade::cuda {

void gemm_cublas(const GemmProblem&, cudaStream_t) {
  fail("matmul: the cublas backend is not available in a CUDA emulator build (-Dgpu_emulator=true has no cuBLAS); "
       "use MatmulBackend::tiled, tensor_core or automatic");
}

bool cublas_can_read(int64_t, int64_t, int64_t, int64_t) { return true; }  // only reached before gemm_cublas fails

}  // namespace brigade::cuda
