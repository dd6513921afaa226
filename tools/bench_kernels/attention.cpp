// Fused attention (kernels/attention.cpp), forward and backward, causal, at a GPT's shapes, against
// the device's matrix-multiply ceiling — cuBLAS's rate at 4096^3 in the same dtype on a GPU, the FMA
// peak on the CPU — and beside the composition it replaces (q kᵀ, the causal mask, softmax, · v as
// separate ops: the scores go through memory).
//
// FLOPs are counted as FlashAttention's papers count them, so the rates compare with theirs: 4 D per
// visible (query, key) pair forward (q kᵀ and P v), 2.5 times that backward (the recomputed S, dP,
// and the three gradient products). The visible pairs are counted exactly, T (T + 1) / 2 per head
// where the papers take T² / 2: 0.05% more at T = 1024. brigade's backward recomputes S and dP once
// more (once per kernel, the price of not using atomics); that extra work is not counted.
#include "autograd/functions.h"
#include "bench_kernels/benchmarks.h"
#include "core/rng.h"
#include "kernels/ops.h"

#include <cmath>
#include <limits>

namespace brigade::bench {
namespace {

void attention_shape(Session& s, const AttentionShape& a, DType t) {
  const Device dev = s.device();
  const Shape shape = {a.batch, a.heads, a.tokens, a.head_dim};
  const Tensor q = randn(shape, t, dev), k = randn(shape, t, dev), v = randn(shape, t, dev);
  const ops::AttentionParams p;  // causal, scale 1/sqrt(D), no dropout
  const ops::AttentionOutput out = ops::attention(q, k, v, p);
  const Tensor gy = randn(shape, t, dev);
  // Causal with Tq = Tk: query i sees keys 0..i.
  const double pairs = double(a.batch * a.heads) * double(a.tokens) * double(a.tokens + 1) / 2;
  const double forward_flops = 4.0 * double(a.head_dim) * pairs;

  double ceiling = 0;
  std::string ceiling_name;
  if (dev.is_cpu()) {
    ceiling = s.fma_peak();
    ceiling_name = "FMA peak";
  } else {
#if BRIGADE_BENCH_GPU
    // One of the run's ceilings (command.cpp measures it first, so this is the cached value).
    ceiling = s.cublas_tflops(t, 4096, 4096, 4096);
    ceiling_name = std::string("cuBLAS ") + dtype_name(t) + " GEMM 4096^3";
#endif
  }
  const std::string text = dims_text(shape) + " causal";
  s.throughput({"attention", "attention fused forward", text, dtype_name(t)}, forward_flops,
               [&] { ops::attention(q, k, v, p); }, ceiling_name, ceiling);
  s.throughput({"attention", "attention fused backward", text, dtype_name(t)}, 2.5 * forward_flops,
               [&] { ops::attention_backward(gy, q, k, v, out, p); }, ceiling_name, ceiling);
  // The composition computes every score, masked or not: the same count is kept so that the two
  // rows' times compare directly.
  const Tensor mask = causal_mask(a.tokens, dev);
  const double scale = 1.0 / std::sqrt(double(a.head_dim));
  s.throughput({"attention", "attention composed forward", text, dtype_name(t)}, forward_flops,
               [&] {
                 const Tensor scores = ops::scale_shift(ops::matmul(q, k.transpose(2, 3)), scale, 0.0);
                 const Tensor weights =
                     ops::softmax(ops::masked_fill(scores, mask, -std::numeric_limits<double>::infinity()), 3);
                 ops::matmul(weights, v);
               },
               ceiling_name, ceiling);
}

}  // namespace

void run_attention_benchmarks(Session& s, const Sizes& sizes) {
  for (DType t : sizes.attention_dtypes)
    for (const AttentionShape& a : sizes.attention_shapes) attention_shape(s, a, t);
}

}  // namespace brigade::bench
