// GroupedQueryAttention: causal self-attention of LLaMA-style decoders — rotary positions on q and k,
// and n_kv_head key/value heads shared by n_head query heads.
//
//   x [B, T, C] --q--> [B, H, T, hd]    --k, v--> [B, Hkv, T, hd]      (four Linears, no bias by default)
//   q, k turned by RotaryEmbedding at their positions
//   each kv head serves the G = H / Hkv query heads h with h / G = its index
//   y = softmax(q k^T / sqrt(hd), causal mask) v, heads merged: [B, T, H hd] --o--> [B, T, C]
//
// Hkv = H is multi-head attention, Hkv = 1 multi-query, anything dividing H in between is grouped
// (LLaMA 2 70B: 64 query heads, 8 kv heads). Fewer kv heads shrink the KV cache by G at generation.
//
// The sharing is a repeat of each kv head G times before the fused attention (brigade::attention),
// whose backward sums the G copies' gradients into the shared head (expand's backward). Why not
// inside the attention kernels: the CPU reference and three CUDA kernels (generic, mma forward, mma
// backward) would each need the head mapping, and the backward's dK and dV a deterministic sum over
// the group; the repeat costs a copy of k and v (G times the size of k, v: at most the size of q each)
// and leaves those kernels, and their tests, as they are.
#pragma once

#include <memory>

#include "kernels/params.h"
#include "nn/init.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rotary.h"

namespace brigade::nn {

struct GroupedQueryAttentionOptions {
  int64_t n_embd = 0;     // C
  int64_t n_head = 0;     // H, query heads
  int64_t n_kv_head = 0;  // Hkv, dividing H; 0 means H
  int64_t head_dim = 0;   // hd; 0 means C / H
  bool qkv_bias = false;  // biases on q, k, v (Qwen2 has them)
  bool out_bias = false;  // a bias on o
  RopeParams rope = {};
  Init init = {};
};

class GroupedQueryAttention : public Module {
 public:
  // `o` writes into the residual stream: init.residual().
  explicit GroupedQueryAttention(const GroupedQueryAttentionOptions& options);

  std::string name() const override { return "GroupedQueryAttention"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;  // [B, T, C] at positions [0, T) -> [B, T, C]
  // Inference with a KV cache (nn/kv_cache.h): x [B, T, C] holds the tokens at positions
  // [past, past + T). Their rotated keys and their values are written into `cache` — [B, Hkv,
  // capacity, hd] buffers, allocated on first use, so the cache holds the kv heads only — and they
  // attend to every cached position up to their own. Equals the last T rows of forward() on the
  // whole sequence. Nothing recorded.
  Tensor forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity);

  const int64_t n_embd, n_head, n_kv_head, head_dim;
  std::shared_ptr<Linear> q;  // C -> H hd
  std::shared_ptr<Linear> k;  // C -> Hkv hd
  std::shared_ptr<Linear> v;  // C -> Hkv hd
  std::shared_ptr<Linear> o;  // H hd -> C
  std::shared_ptr<RotaryEmbedding> rotary;

 private:
  // x [B, T, C] (checked) -> one projection's heads, [B, heads, T, hd] (a view).
  Tensor heads_of(const Tensor& x, Linear& projection, int64_t heads);
  // Causal attention of q [B, H, T, hd] over keys, values [B, Hkv, Tk, hd], heads merged: [B, T, H hd].
  Tensor attend(const Tensor& q, const Tensor& keys, const Tensor& values);
};

}  // namespace brigade::nn
