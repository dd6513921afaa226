// Differentiable dropout. It saves nothing: the backward recomputes the mask from the seed and
// offset (Philox counters, core/rng.h).
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade {

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  Tensor out = ops::dropout(x, p, seed, offset);
  record("dropout", {x}, {out}, [p, seed, offset](const std::vector<Tensor>& g, const std::vector<bool>&) {
    return std::vector<Tensor>{ops::dropout_backward(g[0], p, seed, offset)};
  });
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!training) return x;
  // Take this call's block of counters from the default generator, so consecutive dropouts use
  // disjoint random streams and a run is reproducible from manual_seed.
  ops::check_defined("dropout", x, "input");
  Generator& gen = default_generator();
  const uint64_t seed = gen.seed;
  const uint64_t offset = gen.advance(uint64_t(x.numel()));
  return dropout(x, p, seed, offset);
}

}  // namespace brigade
