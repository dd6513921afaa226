// Embedding: a lookup table from integer ids to learned vectors.
#pragma once

#include "nn/init.h"
#include "nn/module.h"

namespace brigade::nn {

class Embedding : public Module {
 public:
  // weight [num, dim] ~ N(0, init.std), or N(0, 1) when init.std is 0 (PyTorch's default).
  Embedding(int64_t num_embeddings, int64_t dim, const Init& init = {});

  std::string name() const override { return "Embedding"; }
  std::string details() const override;
  // ids (i32/i64) of any shape -> [..., dim]
  Tensor forward(const Tensor& ids) override;

  const int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

}  // namespace brigade::nn
