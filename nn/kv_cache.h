// The KV cache: the keys and values of the tokens a GPT has already read, kept between generation
// steps.
//
// Without it, each new token runs the model over the whole context again — T tokens of work to
// produce one. Attention is the only place a token looks at the others, and only through their keys
// and values, which do not change once computed (a later token cannot affect an earlier one in a
// causal model). So each layer keeps them, and a step runs only the new tokens: their q, k, v, their
// attention over the cached keys, their MLP.
//
// Each layer's k and v are [B, H, capacity, hd] buffers allocated on first use (in the dtype the
// activations have, so bf16 compute keeps a bf16 cache), filled at positions [0, length). H is the
// layer's key/value heads: under grouped-query attention (nn::GroupedQueryAttention) fewer than its
// query heads, and the cache is that much smaller.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace brigade::nn {

struct KVCache {
  struct Layer {
    Tensor k, v;  // [B, H, capacity, hd], undefined until the first step
  };
  explicit KVCache(int64_t layers, int64_t capacity) : layers(size_t(layers)), capacity(capacity) {}

  std::vector<Layer> layers;
  int64_t capacity;    // positions it can hold: the model's block_size
  int64_t length = 0;  // positions filled so far
};

}  // namespace brigade::nn
