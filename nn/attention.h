// CausalSelfAttention: multi-head self-attention where position t only sees positions <= t.
//
//   x [B, T, C] --qkv--> q, k, v, each split into H heads of size hd = C / H: [B, H, T, hd]
//   scores = q k^T / sqrt(hd)                       [B, H, T, T]
//   scores[.., i, j] = -inf for j > i               (the future is masked out)
//   y = softmax(scores) v                           [B, H, T, hd]
//   heads merged back to [B, T, C], then the output projection `proj`.
// By default the middle three lines run as one fused kernel (brigade::attention); `fused = false`
// runs them as the separate ops written above.
#pragma once

#include <array>
#include <memory>

#include "nn/activation.h"
#include "nn/init.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace brigade::nn {

struct AttentionOptions {
  double dropout = 0;  // on the attention weights and on the output
  bool bias = true;    // in the projections
  Init init = {};      // `proj` writes into the residual stream: init.residual()
};

class CausalSelfAttention : public Module {
 public:
  // n_embd must be divisible by n_head.
  CausalSelfAttention(int64_t n_embd, int64_t n_head, const AttentionOptions& options = {});

  std::string name() const override { return "CausalSelfAttention"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;  // [B, T, C] -> [B, T, C]
  // Inference with a KV cache (nn/kv_cache.h): x [B, T, C] holds the tokens at positions
  // [past, past + T); their keys and values are written into `cache` (allocated with room for
  // `capacity` positions on first use) and they attend to every cached position up to their own.
  // Equals the last T rows of forward() on the whole sequence. No dropout, nothing recorded.
  Tensor forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity);

  const int64_t n_embd, n_head;
  std::shared_ptr<Linear> qkv;          // C -> 3C: the three projections in one matmul
  std::shared_ptr<Linear> proj;         // C -> C
  std::shared_ptr<Dropout> attn_drop;   // on the attention weights
  std::shared_ptr<Dropout> resid_drop;  // on the output
  // Fused attention (brigade::attention: one kernel each way, no [T, T] weights kept for the
  // backward) or the composition above, step by step — the reference, and what a reader can follow.
  // Both give the same numbers up to rounding, dropout masks included.
  bool fused = true;

 private:
  // q, k, v [B, H, T, hd] of x [B, T, C] (checked), views of one qkv projection.
  std::array<Tensor, 3> heads_of(const Tensor& x);
  // softmax(q keys^T / sqrt(hd)) values with the causal mask of queries at positions [past, past + T),
  // the heads merged back: [B, T, C]. `dropout`: attn_drop on the weights (training's forward).
  Tensor attend(const Tensor& q, const Tensor& keys, const Tensor& values, int64_t past, bool dropout);
};

}  // namespace brigade::nn
