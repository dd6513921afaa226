#include "nn/embedding.h"

#include "autograd/functions.h"

namespace brigade::nn {

Embedding::Embedding(int64_t num, int64_t dim, const Init& init) : num_embeddings(num), embedding_dim(dim) {
  BRIGADE_CHECK(num > 0 && dim > 0, "Embedding: sizes must be positive, got num=", num, ", dim=", dim);
  weight = register_parameter("weight", init::normal({num, dim}, init.std > 0 ? init.std : 1.0, init.at("weight")));
}

std::string Embedding::details() const {
  return "num=" + std::to_string(num_embeddings) + ", dim=" + std::to_string(embedding_dim);
}

// The rows are looked up in the weight's own dtype and then converted: B*T rows instead of the
// whole table, and the backward scatters straight into the f32 gradient.
Tensor Embedding::forward(const Tensor& ids) { return embedding(weight, ids); }

}  // namespace brigade::nn
