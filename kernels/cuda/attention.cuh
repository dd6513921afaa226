// What every fused-attention kernel shares (the contract: kernels/twins/attention.inc; the kernels:
// attention.cu picks a path, attention_generic.cu and attention_mma_*.cu implement them).
//
//   - HeadRows: one [B, H, T, D] operand with any strides and stride(3) == 1, seen as rows of D;
//   - AttentionGeometry: which keys a query sees (causal rule with past = Tk - Tq) and dropout's
//     keep factor, drawn from the same Philox counter as the CPU: ((b H + h) Tq + i) Tk + j;
//   - the launchers of the two paths, called by attention.cu.
#pragma once

#include "core/philox.h"
#include "kernels/cuda/common.cuh"
#include "kernels/ops.h"

namespace brigade::cuda {

// Rows of one [B, H, T, D] operand: row i of head (b, h) starts at data + b s0 + h s1 + i s2.
template <class T>
struct HeadRows {
  T* data;
  int64_t batch_stride, head_stride, row_stride;

  __device__ __forceinline__ T* row(int b, int h, int64_t i) const {
    return data + b * batch_stride + h * head_stride + i * row_stride;
  }
};

template <class T>
HeadRows<T> head_rows(const Tensor& t) {
  return {static_cast<T*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}

// The sizes and the rules of one attention call, passed to every kernel by value.
struct AttentionGeometry {
  int heads, tq, tk, past;  // query i sits at key position past + i
  bool causal;
  double scale;
  double dropout;  // the probability of dropping a weight; 0: no dropout
  uint64_t seed, offset;

  // Keys [0, key_end(i1)) hold every key some query in [0, i1) sees.
  __device__ __forceinline__ int key_end(int i1) const { return causal ? min(tk, past + i1) : tk; }
  // The first query that sees key j.
  __device__ __forceinline__ int first_query(int j) const { return causal ? max(0, j - past) : 0; }
  __device__ __forceinline__ bool visible(int i, int j) const { return j < tk && (!causal || j <= past + i); }
  // Z: 0 for a dropped weight, 1 / (1 - p) for a kept one — the CPU's rule and its counter, so the
  // two backends drop the same weights (bh = b * heads + h).
  template <class C>
  __device__ __forceinline__ C keep(int bh, int i, int j) const {
    if (dropout == 0) return C(1);
    const uint64_t counter = offset + (uint64_t(bh) * uint64_t(tq) + uint64_t(i)) * uint64_t(tk) + uint64_t(j);
    return philox::uniform(seed, counter) < dropout ? C(0) : C(1.0 / (1.0 - dropout));
  }
};

inline AttentionGeometry geometry_of(const Tensor& q, const Tensor& k, const ops::AttentionParams& p) {
  return {int(q.size(1)), int(q.size(2)), int(k.size(2)), int(k.size(2) - q.size(2)), p.causal, p.scale,
          p.dropout, p.seed, p.offset};
}

// ---- the two paths (attention.cu chooses) ----

// Any head dim up to 256, f32, f64, bf16, f16: CUDA cores.
void attention_forward_generic(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionGeometry& g);
// di: rowsum(grad_y o y), [B, H, Tq] in the statistics dtype (attention.cu computes it).
void attention_backward_generic(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                                const Tensor& grad_y, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& lse, const Tensor& di, const AttentionGeometry& g);

// bf16 and f16 with head dim 64 or 128, every operand's rows 16-byte aligned: mma.sync tensor cores.
bool attention_mma_supports(const std::vector<const Tensor*>& operands);
void attention_forward_mma(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                           const AttentionGeometry& g);
void attention_backward_mma(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_y,
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse, const Tensor& di,
                            const AttentionGeometry& g);

}  // namespace brigade::cuda
