#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::nn {

CausalSelfAttention::CausalSelfAttention(int64_t embd, int64_t heads, double dropout, bool bias, const Init& init)
    : n_embd(embd), n_head(heads) {
  BRIGADE_CHECK(embd > 0 && heads > 0 && embd % heads == 0, "CausalSelfAttention: n_embd=", embd,
                " must be a positive multiple of n_head=", heads);
  qkv = register_module("qkv", std::make_shared<Linear>(embd, 3 * embd, bias, init));
  proj = register_module("proj", std::make_shared<Linear>(embd, embd, bias, init.residual()));
  attn_drop = register_module("attn_drop", std::make_shared<Dropout>(dropout));
  resid_drop = register_module("resid_drop", std::make_shared<Dropout>(dropout));
}

std::string CausalSelfAttention::details() const {
  return "n_embd=" + std::to_string(n_embd) + ", n_head=" + std::to_string(n_head);
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  BRIGADE_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expected input [B, T, ", n_embd,
                "], got ", shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1), H = n_head, hd = n_embd / n_head;

  // One matmul makes q, k and v side by side: [B, T, 3C]. Viewing that as [B, T, 3, H, hd] and
  // moving dims gives [3, B, H, T, hd], so q, k, v are views with the heads as a batch dim.
  Tensor heads = (*qkv)(x).view({B, T, 3, H, hd}).permute({2, 0, 3, 1, 4});
  Tensor q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);

  Tensor scores = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));  // [B, H, T, T]
  // -inf (not just a large negative) makes masked weights exactly 0 after softmax in every dtype; each
  // row keeps its diagonal, so no row is all -inf.
  scores = masked_fill(scores, causal_mask(T, x.device()), -std::numeric_limits<double>::infinity());
  Tensor weights = (*attn_drop)(softmax(scores, -1));

  Tensor y = matmul(weights, v);                   // [B, H, T, hd]
  y = y.transpose(1, 2).reshape({B, T, n_embd});  // heads side by side again (reshape copies here)
  return (*resid_drop)((*proj)(y));
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity) {
  BRIGADE_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expected input [B, T, ", n_embd,
                "], got ", shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1), H = n_head, hd = n_embd / n_head;
  BRIGADE_CHECK(past + T <= capacity, "CausalSelfAttention: positions up to ", past + T, " exceed the KV cache's ",
                capacity);
  Tensor heads = (*qkv)(x).view({B, T, 3, H, hd}).permute({2, 0, 3, 1, 4});
  Tensor q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);
  if (!cache.k.defined()) {
    cache.k = zeros({B, H, capacity, hd}, k.dtype(), k.device());
    cache.v = zeros({B, H, capacity, hd}, v.dtype(), v.device());
  }
  BRIGADE_CHECK(cache.k.size(0) == B, "CausalSelfAttention: the KV cache holds ", cache.k.size(0),
                " sequences, the input ", B);
  ops::copy_(cache.k.slice(2, past, past + T), k);
  ops::copy_(cache.v.slice(2, past, past + T), v);
  const Tensor keys = cache.k.slice(2, 0, past + T), values = cache.v.slice(2, 0, past + T);
  Tensor scores = matmul(q, keys.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));  // [B, H, T, past + T]
  scores = masked_fill(scores, causal_mask(T, x.device(), past), -std::numeric_limits<double>::infinity());
  Tensor y = matmul(softmax(scores, -1), values);  // [B, H, T, hd]
  return (*proj)(y.transpose(1, 2).reshape({B, T, n_embd}));
}

}  // namespace brigade::nn
