// CUDA kernels: dropout with a counter-based mask. Thread i decides element i's fate from
// (seed, offset + i) alone — no mask is stored, and backward recomputes the same one.
//
// On the GPU (the contract both backends share: kernels/twins/dropout.inc):
// Contiguous f32, f64, bf16 or f16 (16-bit data computes in f32). The mask is the CPU's, bit for bit:
// element i is kept iff philox::uniform(seed, offset + i) >= p (core/philox.h runs the same code on
// both devices), and kept values are scaled exactly as the CPU scales them.
#include "core/cuda/capture.h"
#include "core/philox.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace brigade::cuda {
namespace {

template <class T>
__global__ void dropout_kernel(T* out, const T* x, int64_t n, double p, double keep_scale, uint64_t seed,
                               uint64_t offset) {
  using C = compute_t<T>;
  const C scale = C(keep_scale);  // rounded to the compute type once, as the CPU's T(1 / (1 - p))
  BRIGADE_GRID_STRIDE_LOOP(i, n, int64_t) {
    const bool dropped = philox::uniform(seed, offset + uint64_t(i)) < p;
    out[i] = from_compute<T>(dropped ? C(0) : to_compute(x[i]) * scale);
  }
}

}  // namespace

void dropout(const Tensor& out, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  const int64_t n = x.numel();
  if (n == 0) return;
  refuse_in_capture("dropout", stream_for(x), "its mask comes from a seed and offset the host picks at each call, so every replay would repeat the captured mask");
  visit_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<grid_for(n, x.device()), kThreads, 0, stream_for(x)>>>(
        static_cast<T*>(out.raw_data()), static_cast<const T*>(x.raw_data()), n, p, 1.0 / (1.0 - p), seed, offset);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
