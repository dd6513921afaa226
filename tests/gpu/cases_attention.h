// Cross-backend cases: fused attention (brigade::attention), forward (y and lse) and backward.
//
// Both CUDA paths are covered: the tensor-core kernels (bf16 and f16 at head dims 64 and 128, rows
// 16-byte aligned) and the generic one (every other head dim and dtype, and 16-bit views whose rows
// are misaligned). Sequence lengths straddle the tiles (64 rows for the tensor-core path, 8 fixed
// rows and up to 32 streamed ones for the generic path); Tq < Tk is the KV-cache shape; dropout
// must drop the CPU's weights, or the outputs would differ. The emulator is slow, so the sizes are
// small: this whole table takes a few seconds there.
#pragma once

#if BRIGADE_HAVE_CUDA

#include "op_case.h"

namespace gpu_test {

struct AttentionShape {
  int64_t batch, heads, tq, tk, head_dim;
  bool causal;
  double dropout = 0;
  // true: q, k, v are views of one [B, T, 3, H, D] projection (strided, Tq == Tk), as in
  // CausalSelfAttention; false: three [B, H, T, D] tensors in `layout`.
  bool from_qkv = false;
  Layout layout = Layout::contiguous;
};

inline std::string attention_detail(const AttentionShape& s) {
  std::string d = s.causal ? "causal" : "full";
  d += " D " + std::to_string(s.head_dim);
  if (s.tq != s.tk) d += " Tq " + std::to_string(s.tq) + " Tk " + std::to_string(s.tk);
  if (s.dropout > 0) d += " dropout " + std::to_string(s.dropout).substr(0, 3);
  if (s.from_qkv) d += " qkv views";
  return d;
}

inline OpCase attention_case(DType t, const AttentionShape& s) {
  std::vector<Input> inputs;
  if (s.from_qkv) {
    inputs.push_back(floats({s.batch, s.tq, 3, s.heads, s.head_dim}, t));
  } else {
    inputs.push_back(floats({s.batch, s.heads, s.tq, s.head_dim}, t, s.layout));
    inputs.push_back(floats({s.batch, s.heads, s.tk, s.head_dim}, t, s.layout));
    inputs.push_back(floats({s.batch, s.heads, s.tk, s.head_dim}, t, s.layout));
  }
  AttentionParams p;
  p.causal = s.causal;
  p.dropout = s.dropout;
  p.seed = 4242;
  p.offset = 1000;
  const bool from_qkv = s.from_qkv;
  OpFn run = [p, from_qkv](const std::vector<Tensor>& in) {
    Tensor q, k, v;
    if (from_qkv) {
      const Tensor heads = in[0].permute({2, 0, 3, 1, 4});  // [3, B, H, T, D]
      q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);
    } else {
      q = in[0], k = in[1], v = in[2];
    }
    const Tensor y = attention(q, k, v, p);
    return std::vector<Tensor>{y, ops::attention(q.detach(), k.detach(), v.detach(), p).lse};
  };
  return make_case("attention", std::move(inputs), std::move(run), Accuracy::gemm, attention_detail(s));
}

inline std::vector<OpCase> attention_cases() {
  std::vector<OpCase> cases;
  // The tensor-core path: bf16 and f16 at head dims 64 and 128.
  const std::vector<std::pair<DType, AttentionShape>> tensor_core = {
      {DType::bf16, {1, 2, 100, 100, 64, true, 0, true}},
      {DType::bf16, {2, 1, 17, 130, 64, false}},
      {DType::f16, {1, 2, 17, 130, 64, true}},  // the last 17 queries of 130 positions (KV cache)
      {DType::f16, {1, 1, 70, 70, 128, true, 0, true}},
      {DType::bf16, {1, 1, 20, 90, 128, true}},
      {DType::bf16, {1, 1, 1, 1, 64, false}},
      {DType::f16, {2, 1, 1, 33, 64, true}},  // one new token
      {DType::bf16, {1, 1, 65, 65, 128, true, 0.2, true}},
      {DType::f16, {1, 2, 33, 33, 64, false, 0.5}},
      // Long enough for the streamed tiles to cycle through both stages several times (key tiles of
      // 64 forward, 32 for grad_q; query tiles of 32 / 16 for grad_k, grad_v), with several query
      // blocks and heads for the heaviest-first block order to map.
      {DType::bf16, {2, 3, 200, 200, 64, true, 0, true}},
      {DType::f16, {1, 2, 150, 150, 128, true, 0.1, true}},
      {DType::bf16, {1, 2, 96, 250, 64, false}},
  };
  // The generic path: other head dims, f32 and f64, and misaligned 16-bit rows.
  const std::vector<std::pair<DType, AttentionShape>> generic = {
      {DType::f32, {2, 3, 17, 17, 8, true}},
      {DType::f32, {1, 1, 17, 100, 40, false}},
      {DType::f32, {1, 1, 33, 33, 200, true, 0, true}},
      {DType::f32, {1, 2, 130, 130, 64, true, 0, true}},
      {DType::f32, {1, 1, 33, 33, 40, true, 0.3}},
      {DType::f64, {1, 2, 17, 17, 40, true, 0.3}},
      {DType::f64, {1, 1, 5, 33, 64, false}},
      {DType::f64, {1, 1, 9, 9, 256, true}},  // the tile shrinks to a few rows
      {DType::bf16, {1, 2, 33, 33, 40, true, 0, true}},
      {DType::f16, {1, 1, 7, 17, 8, true, 0.2}},
      {DType::bf16, {1, 1, 33, 33, 64, true, 0, false, Layout::offset}},   // misaligned: not tensor cores
      {DType::f16, {1, 1, 17, 17, 128, false, 0, false, Layout::strided}},  // strided head dim: copied first
  };
  for (const auto& list : {tensor_core, generic})
    for (const auto& [t, s] : list) cases.push_back(attention_case(t, s));
  return cases;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
