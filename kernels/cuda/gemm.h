// The four GPU GEMMs behind cuda::matmul, and the one problem description they share.
//
// A GemmProblem is a strided batch of products C_i = A_i @ B_i with raw pointers and element strides:
// A_i(r, p) lives at a.data + i * a.batch_stride + r * a.row_stride + p * a.col_stride, and so on.
// A transposed operand is the same bytes with the two strides swapped; a broadcast batch has
// batch_stride 0. kernels/cuda/matmul.cpp turns tensors into problems (collapsing batch dims and
// copying operands a backend cannot read); each launcher below only checks what it must and runs.
//
// Launchers enqueue on `stream` and never synchronise. All sizes are positive (matmul.cpp handles
// empty products itself) and batch is at most kMaxGemmBatch per call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "kernels/params.h"

namespace brigade::cuda {

struct GemmOperand {
  const void* data = nullptr;
  int64_t row_stride = 0, col_stride = 0, batch_stride = 0;  // in elements
};

struct GemmOutput {
  void* data = nullptr;
  int64_t row_stride = 0, batch_stride = 0;  // in elements; columns are adjacent (col stride 1)
};

// A linear layer's epilogue, applied to C before it is stored (kernels/cuda/epilogue.cuh has the
// arithmetic): C = act(A @ B + bias), with A @ B + bias also written to `pre` (same layout as C) when
// pre is set. bias [n] and pre have C's dtype. The tensor-core and Hopper GEMMs apply it; matmul.cpp runs
// the others plain and applies the epilogue in a pass of its own.
struct GemmEpilogue {
  const void* bias = nullptr;
  void* pre = nullptr;
  Activation activation = Activation::none;

  bool active() const { return bias != nullptr || pre != nullptr || activation != Activation::none; }
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  DType in = DType::f32;   // dtype of A and B
  DType out = DType::f32;  // dtype of C: `in`, or f32 for 16-bit inputs
  GemmOperand a, b;        // A [m, k], B [k, n]
  GemmOutput c;            // C [m, n]
  GemmEpilogue epilogue;   // none by default
};

// The largest batch one launch takes (the CUDA grid's z limit); callers split larger batches.
constexpr int64_t kMaxGemmBatch = 65535;

// cuBLAS (kernels/cuda/gemm_cublas.cpp): f32, f64, bf16, f16. Each of A and B must have a unit stride
// in one dim and a leading dimension at least the other dim's size (cublas_can_read tells).
void gemm_cublas(const GemmProblem& problem, cudaStream_t stream);
bool cublas_can_read(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// The hand-written shared-memory GEMM (kernels/cuda/gemm_tiled.cu): f32, bf16, f16 inputs, any strides.
void gemm_tiled(const GemmProblem& problem, cudaStream_t stream);

// The epilogue as a pass of its own over a finished C [m, n] (contiguous rows, batch 1), for the GEMMs
// that do not apply it: reads C, writes pre (which may be C itself) and C (kernels/cuda/epilogue.cu).
void apply_epilogue(const GemmProblem& problem, Device device, cudaStream_t stream);

// The hand-written tensor-core GEMM (kernels/cuda/gemm_tensor_core.cu): bf16, f16 inputs. Each of A and
// B needs a unit stride in one dim, 16-byte aligned rows along it (tensor_core_can_read tells). The
// one GEMM that applies problem.epilogue itself.
void gemm_tensor_core(const GemmProblem& problem, cudaStream_t stream);
bool tensor_core_can_read(const GemmOperand& x, int64_t rows, int64_t cols);

// The Hopper GEMM (kernels/cuda/gemm_hopper.cu): TMA + wgmma on sm_90 (the emulator runs it too),
// bf16/f16 inputs, one product (batch 1), both operands contiguous along k with 16-byte aligned rows
// (a linear layer's x @ Wᵀ; hopper_can_read tells). Applies problem.epilogue itself. Persistent: at
// most one block per SM, or `max_blocks` when positive (tests use it to give each block many tiles).
void gemm_hopper(const GemmProblem& problem, cudaStream_t stream, int max_blocks = 0);
bool hopper_can_read(const GemmProblem& problem);
// Whether the current device can run it (compute capability 9.x) and this build has it (gpu_arch 90).
bool hopper_gemm_available();

}  // namespace brigade::cuda
