// RotaryEmbedding: turns each query and key head by angles that grow with its token's position, so
// that q.k depends on how far apart two tokens are rather than where each sits (LLaMA, Mistral, Qwen2).
// A module with no parameters: it keeps the cos/sin table (ops::rope_table) for the positions seen so
// far, per device and dtype, and applies brigade::rope with the rows of the positions asked for.
#pragma once

#include "kernels/params.h"
#include "nn/module.h"

namespace brigade::nn {

struct RotaryEmbeddingOptions {
  int64_t head_dim = 0;  // D, even
  RopeParams rope = {};  // theta, and LLaMA 3's frequency scaling if any
};

class RotaryEmbedding : public Module {
 public:
  explicit RotaryEmbedding(const RotaryEmbeddingOptions& options);

  std::string name() const override { return "RotaryEmbedding"; }
  std::string details() const override;
  // x [B, H, T, D] at positions [0, T).
  Tensor forward(const Tensor& x) override { return forward_at(x, 0); }
  // x [B, H, T, D] holding the tokens at positions [start, start + T): a KV-cache step passes the
  // length already cached; anything that sees a slice of a sequence passes where the slice begins.
  Tensor forward_at(const Tensor& x, int64_t start);

  const RotaryEmbeddingOptions options;

 private:
  // The table for positions [0, end), remade (to at least twice the length) when a call needs more.
  Tensor cos_, sin_;
};

}  // namespace brigade::nn
