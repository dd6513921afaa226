// Fused attention (ops::attention, brigade::attention) against three independent references:
//  - plain f64 loops over the whole [Tq, Tk] score matrix, written here (forward, lse, dropout mask);
//  - the composed ops (matmul, masked_fill, softmax, dropout, matmul) through the tape, for gradients;
//  - central finite differences (gradcheck), for gradients in small cases.
// Sizes cross the CPU kernel's 64-row blocks (70, 130) so the online softmax's rescaling runs.
#include "test_util.h"

#include <limits>

using namespace brigade;
using test::random;

namespace {

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
};

std::string describe(const Case& c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " Tq=" + std::to_string(c.Tq) +
         " Tk=" + std::to_string(c.Tk) + " D=" + std::to_string(c.D) + (c.causal ? " causal" : " full");
}

struct Reference {
  std::vector<double> y, lse;  // y [B, H, Tq, D], lse [B, H, Tq]
};

// softmax(scale q k^T, mask) with dropout, times v, the textbook way: every score of a row, then its
// max, its sum, the weights, the dropout mask by the rule in kernels/params.h.
Reference reference(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3);
  const std::vector<double> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  const double scale = p.scale != 0 ? p.scale : 1.0 / std::sqrt(double(D));
  Reference r{std::vector<double>(size_t(B * H * Tq * D)), std::vector<double>(size_t(B * H * Tq))};
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < Tq; ++i) {
      std::vector<double> s(size_t(Tk), -std::numeric_limits<double>::infinity());
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < Tk; ++j) {
        if (p.causal && j > Tk - Tq + i) continue;
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qv[size_t((bh * Tq + i) * D + d)] * kv[size_t((bh * Tk + j) * D + d)];
        s[size_t(j)] = scale * dot;
        m = std::max(m, s[size_t(j)]);
      }
      double total = 0;
      for (int64_t j = 0; j < Tk; ++j) total += std::exp(s[size_t(j)] - m);
      r.lse[size_t(bh * Tq + i)] = m + std::log(total);
      for (int64_t j = 0; j < Tk; ++j) {
        double w = std::exp(s[size_t(j)] - m) / total;
        if (p.dropout > 0) {
          const uint64_t counter = p.offset + uint64_t((bh * Tq + i) * Tk + j);
          w = philox_uniform(p.seed, counter) < p.dropout ? 0.0 : w / (1.0 - p.dropout);
        }
        for (int64_t d = 0; d < D; ++d) r.y[size_t((bh * Tq + i) * D + d)] += w * vv[size_t((bh * Tk + j) * D + d)];
      }
    }
  return r;
}

// The composition CausalSelfAttention runs with fused = false, for any Tq <= Tk.
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p) {
  const int64_t Tq = q.size(2), Tk = k.size(2);
  Tensor scores = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(3))));
  if (p.causal) scores = masked_fill(scores, causal_mask(Tq, q.device(), Tk - Tq), -INFINITY);
  Tensor weights = softmax(scores, -1);
  if (p.dropout > 0) weights = dropout(weights, p.dropout, p.seed, p.offset);
  return matmul(weights, v);
}

AttentionParams with_dropout(bool causal, double p, uint64_t seed, uint64_t offset) {
  AttentionParams a;
  a.causal = causal;
  a.dropout = p;
  a.seed = seed;
  a.offset = offset;
  return a;
}

}  // namespace

TEST_CASE("attention forward equals the f64 textbook computation, lse included") {
  const std::vector<Case> cases = {
      {2, 3, 5, 5, 4, true},   {2, 3, 5, 5, 4, false}, {1, 2, 70, 70, 16, true}, {1, 1, 130, 130, 8, true},
      {1, 2, 130, 70, 8, false}, {2, 1, 3, 70, 16, true}, {1, 1, 1, 9, 1, true},   {1, 1, 65, 129, 33, true},
  };
  for (const Case& c : cases) {
    INFO(describe(c));
    const Tensor q = random({c.B, c.H, c.Tq, c.D}, 1), k = random({c.B, c.H, c.Tk, c.D}, 2),
                 v = random({c.B, c.H, c.Tk, c.D}, 3);
    AttentionParams p;
    p.causal = c.causal;
    const ops::AttentionOutput out = ops::attention(q, k, v, p);
    const Reference ref = reference(q, k, v, p);
    test::require_close(out.y, ref.y, 1e-12, 1e-12);
    test::require_close(out.lse, ref.lse, 1e-12, 1e-12);
    // The heads come out interleaved, ready to merge into [B, Tq, H * D] without a copy.
    CHECK(out.y.transpose(1, 2).is_contiguous());
  }
}

TEST_CASE("attention reads strided views: heads of one qkv projection, a strided last dim") {
  const int64_t B = 2, T = 70, H = 2, D = 8;
  // As CausalSelfAttention makes them: [B, T, 3, H, D] viewed as three [B, H, T, D] tensors.
  const Tensor qkv = random({B, T, 3, H, D}, 4).permute({2, 0, 3, 1, 4});
  const Tensor q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
  REQUIRE(!q.is_contiguous());
  AttentionParams p;
  const Reference ref = reference(ops::contiguous(q), ops::contiguous(k), ops::contiguous(v), p);
  test::require_close(ops::attention(q, k, v, p).y, ref.y, 1e-12, 1e-12);
  // A last dim with stride 2 (the kernels want unit stride; the op copies such a view first).
  test::require_close(ops::attention(test::strided(ops::contiguous(q)), k, v, p).y, ref.y, 1e-12, 1e-12);
}

TEST_CASE("attention in f32 and bf16 stays close to the f64 result") {
  const Case c{2, 2, 70, 70, 16, true};
  const Tensor q = random({c.B, c.H, c.Tq, c.D}, 5), k = random({c.B, c.H, c.Tk, c.D}, 6),
               v = random({c.B, c.H, c.Tk, c.D}, 7);
  AttentionParams p;
  const Reference ref = reference(q, k, v, p);
  const auto as = [](const Tensor& t, DType d) { return ops::to_dtype(t, d); };
  const ops::AttentionOutput f32 = ops::attention(as(q, DType::f32), as(k, DType::f32), as(v, DType::f32), p);
  CHECK(f32.y.dtype() == DType::f32);
  CHECK(f32.lse.dtype() == DType::f32);
  test::require_close(f32.y, ref.y, 1e-5, 1e-5);
  // bf16 inputs (rounded: 8 bits of mantissa) against f64 on the same rounded values.
  const Tensor qb = as(q, DType::bf16), kb = as(k, DType::bf16), vb = as(v, DType::bf16);
  const ops::AttentionOutput bf = ops::attention(qb, kb, vb, p);
  CHECK(bf.y.dtype() == DType::bf16);
  CHECK(bf.lse.dtype() == DType::f32);
  const Reference rb = reference(as(qb, DType::f64), as(kb, DType::f64), as(vb, DType::f64), p);
  test::require_close(bf.y, rb.y, 1e-2, 1e-2);
  test::require_close(bf.lse, rb.lse, 1e-5, 1e-5);
}

TEST_CASE("attention's dropout draws the mask dropout() draws on the composed weights") {
  for (bool causal : {true, false}) {
    INFO((causal ? "causal" : "full"));
    const Tensor q = random({2, 2, 70, 8}, 8), k = random({2, 2, 70, 8}, 9), v = random({2, 2, 70, 8}, 10);
    const AttentionParams p = with_dropout(causal, 0.3, 77, 1000);
    const Tensor y = ops::attention(q, k, v, p).y;
    test::require_close(y, reference(q, k, v, p).y, 1e-12, 1e-12);
    test::require_close(y, composed(q, k, v, p), 1e-12, 1e-12);
    // A different offset is a different mask.
    CHECK(y.to_vector() != ops::attention(q, k, v, with_dropout(causal, 0.3, 77, 1001)).y.to_vector());
  }
}

TEST_CASE("attention's gradients equal the composed ops' gradients through the tape") {
  const std::vector<Case> cases = {{1, 2, 70, 70, 16, true}, {2, 1, 130, 130, 8, true}, {1, 2, 67, 131, 8, false},
                                   {2, 1, 5, 70, 8, true},   {1, 1, 130, 130, 4, false}};
  for (const Case& c : cases)
    for (double drop : {0.0, 0.25}) {
      INFO(describe(c) << " dropout=" << drop);
      const AttentionParams p = with_dropout(c.causal, drop, 5, 123);
      const Tensor q0 = random({c.B, c.H, c.Tq, c.D}, 11), k0 = random({c.B, c.H, c.Tk, c.D}, 12),
                   v0 = random({c.B, c.H, c.Tk, c.D}, 13), u = random({c.B, c.H, c.Tq, c.D}, 14);
      std::vector<Tensor> grads[2];
      for (int fused = 0; fused < 2; ++fused) {
        Tensor q = test::leaf(q0), k = test::leaf(k0), v = test::leaf(v0);
        Tape tape;
        const Tensor loss = tape.record([&] { return sum((fused ? attention(q, k, v, p) : composed(q, k, v, p)) * u); });
        tape.backward(loss);
        grads[fused] = {q.grad(), k.grad(), v.grad()};
      }
      for (int i = 0; i < 3; ++i) {
        INFO("gradient of " << "qkv"[i]);
        test::require_close(grads[1][size_t(i)], grads[0][size_t(i)], 1e-11, 1e-9);
      }
    }
}

TEST_CASE("attention's gradients pass finite differences") {
  for (const Case& c : std::vector<Case>{{1, 2, 4, 4, 3, true}, {2, 1, 3, 5, 2, false}, {1, 1, 2, 6, 3, true}})
    for (double drop : {0.0, 0.4}) {
      INFO(describe(c) << " dropout=" << drop);
      const AttentionParams p = with_dropout(c.causal, drop, 3, 9);
      test::require_gradcheck([&](const std::vector<Tensor>& in) { return attention(in[0], in[1], in[2], p); },
                              {test::leaf(random({c.B, c.H, c.Tq, c.D}, 15)), test::leaf(random({c.B, c.H, c.Tk, c.D}, 16)),
                               test::leaf(random({c.B, c.H, c.Tk, c.D}, 17))});
    }
}

TEST_CASE("attention's backward is deterministic and independent of the thread count") {
  const Tensor q = random({2, 2, 130, 16}, 18, DType::f32), k = random({2, 2, 130, 16}, 19, DType::f32),
               v = random({2, 2, 130, 16}, 20, DType::f32), g = random({2, 2, 130, 16}, 21, DType::f32);
  const AttentionParams p = with_dropout(true, 0.1, 1, 2);
  const int threads = num_threads();
  std::vector<std::vector<double>> runs;
  for (int n : {threads, 1, threads}) {
    set_num_threads(n);
    const ops::AttentionOutput out = ops::attention(q, k, v, p);
    const ops::AttentionGrads grads = ops::attention_backward(g, q, k, v, out, p);
    std::vector<double> all = out.y.to_vector();
    for (const Tensor& t : {grads.q, grads.k, grads.v}) {
      const std::vector<double> part = t.to_vector();
      all.insert(all.end(), part.begin(), part.end());
    }
    runs.push_back(all);
  }
  set_num_threads(threads);
  CHECK(runs[0] == runs[1]);
  CHECK(runs[0] == runs[2]);
}

TEST_CASE("attention refuses what it cannot compute, naming the shapes") {
  const Tensor q = random({1, 2, 4, 8}, 22), k = random({1, 2, 4, 8}, 23);
  AttentionParams p;
  CHECK_THAT(test::error_of([&] { ops::attention(q, k, random({1, 2, 5, 8}, 24), p); }),
             Catch::Contains("k and v must have the same shape") && Catch::Contains("v [1, 2, 5, 8]"));
  CHECK_THAT(test::error_of([&] { ops::attention(q, random({1, 3, 4, 8}, 25), random({1, 3, 4, 8}, 26), p); }),
             Catch::Contains("agree on batch, heads and head dim"));
  CHECK_THAT(test::error_of([&] { ops::attention(q.view({2, 4, 8}), k, k, p); }),
             Catch::Contains("expected q [B, H, Tq, D]"));
  CHECK_THAT(test::error_of([&] { ops::attention(random({1, 2, 6, 8}, 27), k, k, p); }),
             Catch::Contains("causal attention needs no more queries than keys") && Catch::Contains("q [1, 2, 6, 8]"));
  CHECK_THAT(test::error_of([&] { ops::attention(q, k, k, with_dropout(true, 1.0, 0, 0)); }),
             Catch::Contains("dropout must be in [0, 1)"));
  CHECK_THAT(test::error_of([&] { ops::attention(q, ops::to_dtype(k, DType::f32), k, p); }),
             Catch::Contains("attention"));
}

TEST_CASE("attention with no keys or no queries: zeros, as the composed ops give") {
  AttentionParams p;
  p.causal = false;
  const Tensor q = random({1, 2, 3, 4}, 30), none = random({1, 2, 0, 4}, 31);
  const ops::AttentionOutput out = ops::attention(q, none, none, p);
  test::require_close(out.y, std::vector<double>(24, 0.0), 0, 0);
  test::require_close(out.y, composed(q, none, none, p), 0, 0);
  const ops::AttentionGrads g = ops::attention_backward(random({1, 2, 3, 4}, 32), q, none, none, out, p);
  test::require_close(g.q, std::vector<double>(24, 0.0), 0, 0);
  CHECK(g.k.numel() == 0);
  // No queries: empty outputs, zero gradients for the keys and values.
  p.causal = true;
  const Tensor no_q = random({1, 2, 0, 4}, 33), k = random({1, 2, 5, 4}, 34);
  const ops::AttentionOutput empty_out = ops::attention(no_q, k, k, p);
  CHECK(empty_out.y.numel() == 0);
  const ops::AttentionGrads ge = ops::attention_backward(random({1, 2, 0, 4}, 35), no_q, k, k, empty_out, p);
  test::require_close(ge.k, std::vector<double>(40, 0.0), 0, 0);
  test::require_close(ge.v, std::vector<double>(40, 0.0), 0, 0);
}

TEST_CASE("attention with an explicit scale") {
  const Tensor q = random({1, 2, 70, 8}, 36), k = random({1, 2, 70, 8}, 37), v = random({1, 2, 70, 8}, 38);
  AttentionParams p;
  p.scale = 0.2;
  test::require_close(ops::attention(q, k, v, p).y, reference(q, k, v, p).y, 1e-12, 1e-12);
  // Differs from the default 1 / sqrt(8).
  CHECK(ops::attention(q, k, v, p).y.to_vector() != ops::attention(q, k, v, AttentionParams{}).y.to_vector());
}

TEST_CASE("a refused attention call with dropout takes no random counters") {
  manual_seed(5);
  const uint64_t before = default_generator().offset;
  const Tensor q = random({1, 2, 4, 8}, 39), k = random({1, 2, 4, 8}, 40);
  CHECK_THAT(test::error_of([&] { attention(q, k, random({1, 2, 5, 8}, 41), true, 0.1); }),
             Catch::Contains("k and v must have the same shape"));
  CHECK(default_generator().offset == before);
  attention(q, k, k, true, 0.1);  // a good call takes B * H * Tq * Tk = 32
  CHECK(default_generator().offset == before + 32);
}
