// Cross-backend cases: the kernels of LLaMA-style blocks — rotary position embedding (rope, forward
// and its backward, the inverse rotation) and SwiGLU's gate (swiglu), and grouped-query attention as
// the module composes it (rope on q and k, kv heads repeated, fused attention).
#pragma once

#if BRIGADE_HAVE_CUDA

#include "cases_elementwise.h"

namespace gpu_test {

inline std::vector<OpCase> rope_cases() {
  struct RopeShape {
    Shape shape;  // [B, H, T, D]
    int64_t start;
    Layout layout;
    bool llama3;
  };
  const std::vector<RopeShape> shapes = {
      {{1, 1, 1, 2}, 0, contiguous, false},     {{2, 3, 7, 8}, 5, contiguous, false},
      {{1, 2, 33, 64}, 1000, transposed, true}, {{2, 2, 9, 16}, 0, strided, false},
      {{1, 3, 5, 128}, 70000, offset, true},    {{3, 2, 4, 6}, 2, expanded, false},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (const RopeShape& s : shapes) {
      if (t != DType::f32 && s.layout != contiguous && s.layout != transposed) continue;
      RopeParams p{.theta = 500000};
      if (s.llama3) p.llama3 = RopeLlama3Scaling{.original_max_position_embeddings = 512};
      const int64_t start = s.start;
      cases.push_back(make_case(
          "rope", {floats(s.shape, t, s.layout)},
          [start, p](const std::vector<Tensor>& in) { return std::vector<Tensor>{rope(in[0], start, p)}; },
          Accuracy::reduction,  // a * cos - b * sin: two products, which the GPU may fuse
          "start " + std::to_string(start) + (s.llama3 ? " llama3" : "")));
    }
  }
  return cases;
}

inline std::vector<OpCase> swiglu_cases() {
  std::vector<OpCase> cases;
  // Sizes around the 16-byte vectors of the forward (4 f32, 8 bf16): whole vectors, and tails.
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (const Shape& shape : std::vector<Shape>{{1}, {3, 8}, {5, 37}, {2, 3, 129}})
      cases.push_back(make_case(
          "swiglu", {floats(shape, t).scaled(3.0), floats(shape, t)},
          [](const std::vector<Tensor>& in) { return std::vector<Tensor>{swiglu(in[0], in[1])}; },
          Accuracy::elementwise));
  // A gate that is a strided view: the op layer packs it first.
  cases.push_back(make_case(
      "swiglu", {floats({4, 33}, DType::f32, strided), floats({4, 33}, DType::f32, transposed)},
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{swiglu(in[0], in[1])}; }, Accuracy::elementwise,
      "strided"));
  return cases;
}

// Grouped-query attention as nn::GroupedQueryAttention computes it: q [B, H, T, hd], k and v
// [B, Hkv, T, hd]; k and v's gradients are the sums over each group of query heads.
inline std::vector<OpCase> grouped_attention_cases() {
  std::vector<OpCase> cases;
  for (int64_t kv_heads : {1, 2}) {
    const int64_t group = 4 / kv_heads;
    cases.push_back(make_case(
        "grouped_attention", {floats({2, 4, 9, 8}, DType::f32), floats({2, kv_heads, 9, 8}, DType::f32),
                              floats({2, kv_heads, 9, 8}, DType::f32)},
        [group](const std::vector<Tensor>& in) {
          const auto repeat = [group](const Tensor& t) {
            return t.unsqueeze(2).expand({t.size(0), t.size(1), group, t.size(2), t.size(3)}).reshape(
                {t.size(0), t.size(1) * group, t.size(2), t.size(3)});
          };
          const Tensor q = rope(in[0], 3), k = rope(in[1], 3);
          return std::vector<Tensor>{attention(q, repeat(k), repeat(in[2]))};
        },
        Accuracy::reduction, std::to_string(kv_heads) + " kv heads"));
  }
  return cases;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
