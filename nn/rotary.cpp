#include "nn/rotary.h"

#include <algorithm>
#include <sstream>

#include "autograd/functions.h"
#include "kernels/ops.h"

namespace brigade::nn {

RotaryEmbedding::RotaryEmbedding(const RotaryEmbeddingOptions& o) : options(o) {
  ops::rope_frequencies(o.head_dim, o.rope);  // checks head_dim, theta and the scaling now, not at first use
}

std::string RotaryEmbedding::details() const {
  std::ostringstream os;
  os << "head_dim=" << options.head_dim << ", theta=" << options.rope.theta;
  if (options.rope.llama3) os << ", llama3 factor=" << options.rope.llama3->factor;
  return os.str();
}

Tensor RotaryEmbedding::forward_at(const Tensor& x, int64_t start) {
  BRIGADE_CHECK(x.dim() == 4 && x.size(3) == options.head_dim, "RotaryEmbedding: expected input [B, H, T, ",
                options.head_dim, "], got ", shape_str(x.shape()));
  BRIGADE_CHECK(start >= 0, "RotaryEmbedding: start position must not be negative, got ", start);
  const int64_t end = start + x.size(2);
  const DType dtype = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  if (!cos_.defined() || cos_.size(0) < end || cos_.dtype() != dtype || cos_.device() != x.device()) {
    // Every row is computed from its own position alone, so a longer table has the same rows.
    const int64_t rows = std::max(end, cos_.defined() ? 2 * cos_.size(0) : end);
    ops::RopeTable table = ops::rope_table(options.head_dim, 0, rows, options.rope, dtype, x.device());
    cos_ = table.cos;
    sin_ = table.sin;
  }
  return rope(x, cos_.slice(0, start, end), sin_.slice(0, start, end));
}

}  // namespace brigade::nn
