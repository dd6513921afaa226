// A linear layer's epilogue as a pass of its own, for the GEMMs that do not apply it themselves
// (cuBLAS, the tiled GEMM): one thread per element of C, reading the product and writing pre and out.
// The arithmetic is epilogue.cuh's, the same the tensor-core GEMM applies in registers.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/epilogue.cuh"
#include "kernels/cuda/gemm.h"

namespace brigade::cuda {
namespace {

// A grid-stride loop that keeps each element's column as it goes: one 64-bit division per thread
// instead of one per element (the bias is indexed by column).
template <class Out>
__global__ void epilogue_kernel(Out* c, Epilogue<Out> e, int64_t m, int64_t n) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x, step = stride % n;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, col = i % n;
  for (; i < m * n; i += stride) {
    const Out h = add_bias(e, to_compute(c[i]), col);
    if (e.pre) e.pre[i] = h;
    c[i] = from_compute<Out>(activate(e, h));
    col += step;
    if (col >= n) col -= n;
  }
}

template <class Out>
void launch(const GemmProblem& p, Device device, cudaStream_t stream) {
  const Epilogue<Out> e = epilogue_of<Out>(p.epilogue);
  epilogue_kernel<Out><<<grid_for(p.m * p.n, device), kThreads, 0, stream>>>(
      static_cast<Out*>(p.c.data), e, p.m, p.n);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void apply_epilogue(const GemmProblem& p, Device device, cudaStream_t stream) {
  BRIGADE_CHECK(p.batch == 1 && p.c.row_stride == p.n, "linear epilogue: C must be one contiguous [", p.m, ", ",
                p.n, "] matrix (row stride ", p.c.row_stride, ", batch ", p.batch, ")");
  visit_floating(p.out, "linear epilogue", [&](auto tag) { launch<decltype(tag)>(p, device, stream); });
}

}  // namespace brigade::cuda
