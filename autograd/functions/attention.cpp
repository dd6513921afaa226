// Differentiable fused attention: one tape node for softmax(q k^T * scale, mask) v with dropout.
// The tape keeps q, k, v, the output and the per-query log-sum-exp — O(T d) per head, where the
// composed version (matmul, masked_fill, softmax, dropout, matmul) keeps the [T, T] weights.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade {

Tensor attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const AttentionParams& p) {
  const Tensor q = autocast(q_in), k = autocast(k_in), v = autocast(v_in);
  ops::AttentionOutput out = ops::attention(q, k, v, p);
  const Tensor y = out.y;
  if (!should_record({q, k, v})) return y;
  out.y = y.detach();  // same bytes, without y's autograd identity (the tape must not hold y itself)
  record("attention", {q, k, v}, {y}, [q, k, v, out, p](const std::vector<Tensor>& g, const std::vector<bool>&) {
    ops::AttentionGrads grads = ops::attention_backward(g[0], q, k, v, out, p);
    return std::vector<Tensor>{grads.q, grads.k, grads.v};
  });
  return y;
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double dropout) {
  AttentionParams p;
  p.causal = causal;
  if (dropout > 0) {
    // The same block of counters dropout() on the composed [B, H, Tq, Tk] weights would take, so a
    // model gives the same numbers fused or composed. Checked first: a call that fails takes none.
    p.dropout = dropout;
    ops::check_attention_inputs("attention", q, k, v, p);
    Generator& gen = default_generator();
    p.seed = gen.seed;
    p.offset = gen.advance(uint64_t(q.size(0) * q.size(1) * q.size(2) * k.size(2)));
  }
  return attention(q, k, v, p);
}

}  // namespace brigade
