#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::nn {

CausalSelfAttention::CausalSelfAttention(int64_t embd, int64_t heads, const AttentionOptions& o)
    : n_embd(embd), n_head(heads) {
  BRIGADE_CHECK(embd > 0 && heads > 0 && embd % heads == 0, "CausalSelfAttention: n_embd=", embd,
                " must be a positive multiple of n_head=", heads);
  qkv = register_module("qkv", std::make_shared<Linear>(embd, 3 * embd, LinearOptions{.bias = o.bias, .init = o.init.at("qkv")}));
  proj = register_module(
      "proj", std::make_shared<Linear>(embd, embd, LinearOptions{.bias = o.bias, .init = o.init.residual().at("proj")}));
  attn_drop = register_module("attn_drop", std::make_shared<Dropout>(o.dropout));
  resid_drop = register_module("resid_drop", std::make_shared<Dropout>(o.dropout));
}

std::string CausalSelfAttention::details() const {
  return "n_embd=" + std::to_string(n_embd) + ", n_head=" + std::to_string(n_head);
}

std::array<Tensor, 3> CausalSelfAttention::heads_of(const Tensor& x) {
  BRIGADE_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expected input [B, T, ", n_embd,
                "], got ", shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1);
  // One matmul makes q, k and v side by side: [B, T, 3C]. Viewing that as [B, T, 3, H, hd] and
  // moving dims gives [3, B, H, T, hd], so q, k, v are views with the heads as a batch dim.
  Tensor heads = (*qkv)(x).view({B, T, 3, n_head, n_embd / n_head}).permute({2, 0, 3, 1, 4});
  return {heads.select(0, 0), heads.select(0, 1), heads.select(0, 2)};
}

Tensor CausalSelfAttention::attend(const Tensor& q, const Tensor& keys, const Tensor& values, int64_t past,
                                   bool dropout) {
  const int64_t B = q.size(0), T = q.size(2), hd = q.size(3);
  const double p = dropout && attn_drop->is_training() ? attn_drop->p : 0.0;
  if (fused) {
    // One kernel each way; y comes laid out as [B, T, H, hd], so merging the heads is a free view.
    // The causal rule puts the T queries at positions [past, past + T) of the keys.
    return attention(q, keys, values, /*causal=*/true, p).transpose(1, 2).view({B, T, n_embd});
  }
  Tensor scores = matmul(q, keys.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));  // [B, H, T, past + T]
  // -inf (not just a large negative) makes masked weights exactly 0 after softmax in every dtype; each
  // row keeps its diagonal, so no row is all -inf.
  scores = masked_fill(scores, causal_mask(T, q.device(), past), -std::numeric_limits<double>::infinity());
  Tensor weights = softmax(scores, -1);
  if (p > 0) weights = (*attn_drop)(weights);
  Tensor y = matmul(weights, values);                // [B, H, T, hd]
  return y.transpose(1, 2).reshape({B, T, n_embd});  // heads side by side again (reshape copies here)
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  auto [q, k, v] = heads_of(x);
  return (*resid_drop)((*proj)(attend(q, k, v, 0, /*dropout=*/true)));
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity) {
  auto [q, k, v] = heads_of(x);
  BRIGADE_CHECK(past + x.size(1) <= capacity, "CausalSelfAttention: positions up to ", past + x.size(1),
                " exceed the KV cache's ", capacity);
  if (!cache.k.defined()) {
    const Shape shape = {x.size(0), n_head, capacity, n_embd / n_head};
    cache.k = zeros(shape, k.dtype(), k.device());
    cache.v = zeros(shape, v.dtype(), v.device());
  }
  BRIGADE_CHECK(cache.k.size(0) == x.size(0), "CausalSelfAttention: the KV cache holds ", cache.k.size(0),
                " sequences, the input ", x.size(0));
  const int64_t end = past + x.size(1);
  ops::copy_(cache.k.slice(2, past, end), k);
  ops::copy_(cache.v.slice(2, past, end), v);
  return (*proj)(attend(q, cache.k.slice(2, 0, end), cache.v.slice(2, 0, end), past, /*dropout=*/false));
}

}  // namespace brigade::nn
