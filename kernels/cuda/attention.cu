// CUDA kernels: fused attention (the contract: kernels/twins/attention.inc). This file picks a path
// and computes backward's row statistic; the kernels are in
//   attention_mma_forward.cu / attention_mma_backward.cu: bf16 and f16 at head dims 64 and 128,
//       16-byte aligned rows — mma.sync tensor cores (FlashAttention-2's tiling);
//   attention_generic.cu: everything else (any head dim up to 256, f32, f64, bf16, f16) on CUDA cores.
// Both compute the softmax in f32 (f64 for f64) and write every output element exactly once; neither
// uses atomics, so backward gives the same bits on every run.
#include "core/cuda/capture.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/kernels.h"

namespace brigade::cuda {
namespace {

// D_i = sum_d grad_y[i, d] y[i, d] in the compute type: one warp per query row (lanes stride over d,
// then a butterfly sum in a fixed order).
template <class T>
__global__ void row_dot_kernel(typename ComputeType<T>::type* di, HeadRows<const T> grad_y, HeadRows<const T> y,
                               int heads, int tq, int d, int64_t rows) {
  using C = compute_t<T>;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (row >= rows) return;  // whole warps leave together (threadIdx.y is the warp)
  const int i = int(row % tq), bh = int(row / tq);
  const T* gy = grad_y.row(bh / heads, bh % heads, i);
  const T* yr = y.row(bh / heads, bh % heads, i);
  C dot = 0;
  for (int e = int(threadIdx.x); e < d; e += kWarp) dot += to_compute(gy[e]) * to_compute(yr[e]);
  dot = warp_reduce(dot, Sum{});
  if (threadIdx.x == 0) di[row] = dot;
}

template <class T>
HeadRows<const T> const_rows(const Tensor& t) {
  return {static_cast<const T*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}

}  // namespace

void attention_forward(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const ops::AttentionParams& p) {
  const AttentionGeometry g = geometry_of(q, k, p);
  if (p.dropout > 0) refuse_in_capture("attention with dropout", stream_for(q), "its mask comes from a seed and offset the host picks at each call, so every replay would repeat the captured mask");
  if (attention_mma_supports({&y, &q, &k, &v})) return attention_forward_mma(y, lse, q, k, v, g);
  attention_forward_generic(y, lse, q, k, v, g);
}

void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_y,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse,
                        const ops::AttentionParams& p) {
  const AttentionGeometry g = geometry_of(q, k, p);
  const int64_t rows = q.size(0) * q.size(1) * q.size(2);
  const Tensor di = empty({q.size(0), q.size(1), q.size(2)}, lse.dtype(), q.device());
  visit_floating(q.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    row_dot_kernel<T><<<unsigned(ceil_div(rows, kRowsPerBlock)), dim3(kWarp, kRowsPerBlock), 0, stream_for(q)>>>(
        static_cast<compute_t<T>*>(di.raw_data()), const_rows<T>(grad_y), const_rows<T>(y), g.heads, g.tq,
        int(q.size(3)), rows);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
  if (attention_mma_supports({&grad_q, &grad_k, &grad_v, &grad_y, &q, &k, &v}))
    return attention_backward_mma(grad_q, grad_k, grad_v, grad_y, q, k, v, lse, di, g);
  attention_backward_generic(grad_q, grad_k, grad_v, grad_y, q, k, v, lse, di, g);
}

}  // namespace brigade::cuda
