// What the CUDA emulator cannot run: cuBLAS (a vendor library) and the tensor-core GEMM (inline PTX:
// ldmatrix, mma.sync and cp.async have no C++ meaning). matmul's automatic choice is the tiled GEMM
// here (kernels/cuda/matmul.cpp); asking for either of these by name is an error that says why.
#include "core/error.h"
#include "kernels/cuda/gemm.h"

namespace brigade::cuda {

void gemm_cublas(const GemmProblem&, cudaStream_t) {
  fail("matmul: the cublas backend is not available in a CUDA emulator build (-Dgpu_emulator=true has no cuBLAS); "
       "use MatmulBackend::tiled or automatic");
}

bool cublas_can_read(int64_t, int64_t, int64_t, int64_t) { return true; }  // only reached before gemm_cublas fails

void gemm_tensor_core(const GemmProblem&, cudaStream_t) {
  fail("matmul: the tensor_core backend is not available in a CUDA emulator build: its inline PTX (ldmatrix, "
       "mma.sync, cp.async) runs only on a GPU; use MatmulBackend::tiled or automatic");
}

bool tensor_core_can_read(const GemmOperand&, int64_t, int64_t) { return true; }

}  // namespace brigade::cuda
