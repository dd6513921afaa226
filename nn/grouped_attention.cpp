#include "nn/grouped_attention.h"

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::nn {
namespace {

// kv [B, Hkv, T, hd] -> [B, Hkv G, T, hd], head h a copy of kv head h / G. A view that repeats
// (expand, stride 0) and a reshape that makes it real: the gradient of the copies flows back through
// the expand, which sums them into the head they came from.
Tensor repeat_heads(const Tensor& kv, int64_t group) {
  if (group == 1) return kv;
  const int64_t B = kv.size(0), heads = kv.size(1), T = kv.size(2), hd = kv.size(3);
  return kv.unsqueeze(2).expand({B, heads, group, T, hd}).reshape({B, heads * group, T, hd});
}

}  // namespace

GroupedQueryAttention::GroupedQueryAttention(const GroupedQueryAttentionOptions& opt)
    : n_embd(opt.n_embd),
      n_head(opt.n_head),
      n_kv_head(opt.n_kv_head == 0 ? opt.n_head : opt.n_kv_head),
      head_dim(opt.head_dim == 0 && opt.n_head > 0 ? opt.n_embd / opt.n_head : opt.head_dim) {
  BRIGADE_CHECK(n_embd > 0 && n_head > 0, "GroupedQueryAttention: n_embd and n_head must be positive, got n_embd=",
                n_embd, ", n_head=", n_head);
  BRIGADE_CHECK(n_kv_head > 0 && n_head % n_kv_head == 0, "GroupedQueryAttention: n_kv_head=", n_kv_head,
                " must divide n_head=", n_head);
  BRIGADE_CHECK(opt.head_dim != 0 || n_embd % n_head == 0, "GroupedQueryAttention: n_embd=", n_embd,
                " is not a multiple of n_head=", n_head, "; give head_dim");
  BRIGADE_CHECK(head_dim > 0 && head_dim % 2 == 0, "GroupedQueryAttention: head_dim must be positive and even "
                "(rotary embedding turns pairs), got ", head_dim);
  const Init& init = opt.init;
  q = register_module("q", std::make_shared<Linear>(n_embd, n_head * head_dim, LinearOptions{.bias = opt.qkv_bias, .init = init.at("q")}));
  k = register_module("k", std::make_shared<Linear>(n_embd, n_kv_head * head_dim, LinearOptions{.bias = opt.qkv_bias, .init = init.at("k")}));
  v = register_module("v", std::make_shared<Linear>(n_embd, n_kv_head * head_dim, LinearOptions{.bias = opt.qkv_bias, .init = init.at("v")}));
  o = register_module("o", std::make_shared<Linear>(n_head * head_dim, n_embd, LinearOptions{.bias = opt.out_bias, .init = init.residual().at("o")}));
  rotary = register_module("rotary", std::make_shared<RotaryEmbedding>(
                                         RotaryEmbeddingOptions{.head_dim = head_dim, .rope = opt.rope}));
}

std::string GroupedQueryAttention::details() const {
  return "n_embd=" + std::to_string(n_embd) + ", n_head=" + std::to_string(n_head) +
         ", n_kv_head=" + std::to_string(n_kv_head) + ", head_dim=" + std::to_string(head_dim);
}

Tensor GroupedQueryAttention::heads_of(const Tensor& x, Linear& projection, int64_t heads) {
  BRIGADE_CHECK(x.dim() == 3 && x.size(2) == n_embd, "GroupedQueryAttention: expected input [B, T, ", n_embd,
                "], got ", shape_str(x.shape()));
  return projection(x).view({x.size(0), x.size(1), heads, head_dim}).transpose(1, 2);
}

Tensor GroupedQueryAttention::attend(const Tensor& q_heads, const Tensor& keys, const Tensor& values) {
  const int64_t B = q_heads.size(0), T = q_heads.size(2), group = n_head / n_kv_head;
  // The causal rule puts the T queries at the last T positions of the keys (a cache's past first).
  // y comes laid out as [B, T, H, hd], so merging the heads is a free view.
  const Tensor y = attention(q_heads, repeat_heads(keys, group), repeat_heads(values, group), /*causal=*/true);
  return y.transpose(1, 2).view({B, T, n_head * head_dim});
}

Tensor GroupedQueryAttention::forward(const Tensor& x) {
  const Tensor qh = rotary->forward_at(heads_of(x, *q, n_head), 0);
  const Tensor kh = rotary->forward_at(heads_of(x, *k, n_kv_head), 0);
  return (*o)(attend(qh, kh, heads_of(x, *v, n_kv_head)));
}

Tensor GroupedQueryAttention::forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t past, int64_t capacity) {
  NoGradGuard no_grad;
  const int64_t B = x.size(0), end = past + x.size(1);
  BRIGADE_CHECK(past >= 0 && end <= capacity, "GroupedQueryAttention: positions [", past, ", ", end,
                ") exceed the KV cache's ", capacity);
  const Tensor qh = rotary->forward_at(heads_of(x, *q, n_head), past);
  const Tensor kh = rotary->forward_at(heads_of(x, *k, n_kv_head), past);
  const Tensor vh = heads_of(x, *v, n_kv_head);
  if (!cache.k.defined()) {
    const Shape shape = {B, n_kv_head, capacity, head_dim};
    cache.k = zeros(shape, kh.dtype(), kh.device());
    cache.v = zeros(shape, vh.dtype(), vh.device());
  }
  BRIGADE_CHECK(cache.k.size(0) == B && cache.k.size(1) == n_kv_head, "GroupedQueryAttention: the KV cache holds ",
                cache.k.size(0), " sequences of ", cache.k.size(1), " kv heads, the input ", B, " of ", n_kv_head);
  ops::copy_(cache.k.slice(2, past, end), kh);
  ops::copy_(cache.v.slice(2, past, end), vh);
  return (*o)(attend(qh, cache.k.slice(2, 0, end), cache.v.slice(2, 0, end)));
}

}  // namespace brigade::nn
