// Tests for the blocks of LLaMA-style decoders: RotaryEmbedding, GroupedQueryAttention and SwiGLU,
// and a whole pre-norm block (RMSNorm -> attention with rotary positions -> residual -> RMSNorm ->
// SwiGLU -> residual) and a whole llama nn::GPT (tied and untied) against f64 loops written here from
// the definitions. Gradients, the kv heads' sums over their groups of query heads included, against
// finite differences (gradcheck).
#include <cmath>

#include "linear_ref.h"
#include "nn/gpt.h"
#include "nn/grouped_attention.h"
#include "nn/norm.h"
#include "nn/rotary.h"
#include "nn/swiglu.h"
#include "test_util.h"

using namespace brigade;
using Catch::Contains;
using test::random;
using test::require_close;

namespace {

using Matrix = std::vector<double>;  // row-major

// x [n, in] through fc, by linear_ref's loops.
Matrix linear_ref(const Matrix& x, int64_t in, const nn::Linear& fc) {
  const int64_t out = fc.weight.size(0);
  return test::linear_ref(x, int64_t(x.size()) / in, in, fc.weight.to_vector(),
                          fc.bias.defined() ? fc.bias.to_vector() : Matrix(), out);
}

Matrix rms_norm_ref(const Matrix& x, int64_t dim, const nn::RMSNorm& norm) {
  const Matrix w = norm.weight.to_vector();
  Matrix y(x.size());
  for (size_t r = 0; r < x.size() / size_t(dim); ++r) {
    double ms = 0;
    for (int64_t i = 0; i < dim; ++i) ms += x[r * size_t(dim) + size_t(i)] * x[r * size_t(dim) + size_t(i)] / double(dim);
    for (int64_t i = 0; i < dim; ++i)
      y[r * size_t(dim) + size_t(i)] = x[r * size_t(dim) + size_t(i)] / std::sqrt(ms + norm.eps) * w[size_t(i)];
  }
  return y;
}

// Turns head `h` of row (b, t) of a [B, T, heads * hd] projection in place: pair (i, i + hd/2) by
// t * theta^(-2i / hd).
void rotate_ref(Matrix& p, int64_t row, int64_t h, int64_t heads, int64_t hd, int64_t t, double theta) {
  double* v = p.data() + (row * heads + h) * hd;
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double angle = double(t) / std::pow(theta, double(2 * i) / double(hd));
    const double a = v[i], b = v[i + hd / 2];
    v[i] = a * std::cos(angle) - b * std::sin(angle);
    v[i + hd / 2] = b * std::cos(angle) + a * std::sin(angle);
  }
}

// GroupedQueryAttention on x [B, T, C] at positions [0, T), from the definition.
Matrix attention_ref(const Matrix& x, int64_t B, int64_t T, nn::GroupedQueryAttention& attn, double theta) {
  const int64_t C = attn.n_embd, H = attn.n_head, KV = attn.n_kv_head, hd = attn.head_dim;
  Matrix q = linear_ref(x, C, *attn.q), k = linear_ref(x, C, *attn.k), v = linear_ref(x, C, *attn.v);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) rotate_ref(q, b * T + t, h, H, hd, t, theta);
      for (int64_t h = 0; h < KV; ++h) rotate_ref(k, b * T + t, h, KV, hd, t, theta);
    }
  Matrix merged(size_t(B * T * H * hd), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / KV);  // the kv head this query head reads
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> w(size_t(i + 1));
        double top = -1e300, total = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < hd; ++d)
            s += q[size_t(((b * T + i) * H + h) * hd + d)] * k[size_t(((b * T + j) * KV + g) * hd + d)];
          w[size_t(j)] = s / std::sqrt(double(hd));
          top = std::max(top, w[size_t(j)]);
        }
        for (double& s : w) total += (s = std::exp(s - top));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < hd; ++d)
            merged[size_t(((b * T + i) * H + h) * hd + d)] +=
                w[size_t(j)] / total * v[size_t(((b * T + j) * KV + g) * hd + d)];
      }
    }
  return linear_ref(merged, H * hd, *attn.o);
}

Matrix swiglu_ref(const Matrix& x, nn::SwiGLU& mlp) {
  const Matrix g = linear_ref(x, mlp.options.dim, *mlp.gate), u = linear_ref(x, mlp.options.dim, *mlp.up);
  Matrix h(g.size());
  for (size_t i = 0; i < g.size(); ++i) h[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
  return linear_ref(h, mlp.options.hidden, *mlp.down);
}

Matrix plus(Matrix a, const Matrix& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

}  // namespace

TEST_CASE("A LLaMA-style block matches f64 loops: RMSNorm, GQA with rotary positions, SwiGLU", "[nn][llama]") {
  const int64_t B = 2, T = 6, C = 16, H = 4, hidden = 24;
  const double theta = 500.0;  // a small theta: the slow pairs turn visibly within 6 positions
  for (int64_t kv_heads : {4, 2, 1}) {  // multi-head, grouped, multi-query
    INFO(kv_heads << " kv heads");
    Generator gen(71);
    const nn::Init init{.dtype = DType::f64, .generator = &gen};
    nn::RMSNorm norm1(C, {.eps = 1e-6, .init = init}), norm2(C, {.eps = 1e-6, .init = init});
    ops::copy_(norm1.weight, random({C}, 72));
    ops::copy_(norm2.weight, random({C}, 73));
    nn::GroupedQueryAttention attn({.n_embd = C, .n_head = H, .n_kv_head = kv_heads, .qkv_bias = true,
                                    .rope = {.theta = theta}, .init = init});
    nn::SwiGLU mlp({.dim = C, .hidden = hidden, .init = init});
    REQUIRE(attn.k->weight.shape() == Shape{kv_heads * 4, C});
    const Tensor x = random({B, T, C}, 74);

    const Tensor h = x + attn(norm1(x));
    const Tensor y = h + mlp(norm2(h));

    const Matrix xv = x.to_vector();
    const Matrix hv = plus(xv, attention_ref(rms_norm_ref(xv, C, norm1), B, T, attn, theta));
    const Matrix yv = plus(hv, swiglu_ref(rms_norm_ref(hv, C, norm2), mlp));
    require_close(y, yv, 1e-11, 1e-11);
  }
}

TEST_CASE("A llama nn::GPT's logits match f64 loops: token rows, the blocks, the final RMSNorm, its head",
          "[nn][llama]") {
  // Every parameter random (biases and norm gains too), so each one's place in the assembly shows.
  const int64_t B = 2, T = 5, C = 16, V = 13;
  const double theta = 500.0;
  for (bool tied : {false, true}) {
    INFO((tied ? "tied" : "untied"));
    nn::GPTConfig c{.vocab_size = V, .block_size = 8, .n_layer = 2, .n_head = 4, .n_embd = C, .dtype = DType::f64};
    c.arch = nn::Arch::llama;
    c.n_kv_head = 2;
    c.mlp_hidden = 24;
    c.rope.theta = theta;
    c.tie_embeddings = tied;
    nn::GPT gpt(c);
    uint64_t seed = 200;
    for (auto& [name, p] : gpt.named_parameters()) ops::copy_(p, random(p.shape(), seed++));
    const Tensor idx = from_vector({3, 0, 12, 7, 7, 1, 5, 9, 2, 11}, {B, T}, DType::i64);
    const Tensor logits = gpt(idx);

    const Matrix wte = gpt.embed->wte->weight.to_vector();
    Matrix x;
    for (double id : idx.to_vector()) x.insert(x.end(), wte.begin() + int64_t(id) * C, wte.begin() + (int64_t(id) + 1) * C);
    for (int64_t i = 0; i < c.n_layer; ++i) {
      nn::TransformerBlock& block = *gpt.block(i);
      const Matrix h = plus(x, attention_ref(rms_norm_ref(x, C, *block.rms1), B, T, *block.gqa, theta));
      x = plus(h, swiglu_ref(rms_norm_ref(h, C, *block.rms2), *block.swiglu));
    }
    const Matrix normed = rms_norm_ref(x, C, *gpt.head->rms_f);
    const Matrix want = tied ? test::linear_ref(normed, B * T, C, wte, Matrix(), V) : linear_ref(normed, C, *gpt.head->lm_head);
    require_close(logits, want, 1e-11, 1e-11);
  }
}

TEST_CASE("GroupedQueryAttention: gradients of x and of the shared kv projections (gradcheck)", "[nn][llama][grad]") {
  Generator gen(81);
  const nn::Init init{.dtype = DType::f64, .generator = &gen};
  nn::GroupedQueryAttention attn({.n_embd = 8, .n_head = 4, .n_kv_head = 2, .head_dim = 4, .out_bias = true,
                                  .rope = {.theta = 100}, .init = init});
  const Tensor x = test::leaf(random({2, 3, 8}, 82));
  // k and v's weights each serve two query heads: their gradients are the sums over both.
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return attn(in[0]); },
                          {x, attn.k->weight, attn.v->weight, attn.q->weight, attn.o->bias});
  nn::SwiGLU mlp({.dim = 4, .hidden = 6, .bias = true, .init = init});
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return mlp(in[0]); },
                          {test::leaf(random({3, 4}, 83)), mlp.gate->weight, mlp.up->bias, mlp.down->weight});
}

TEST_CASE("GroupedQueryAttention: KV-cache steps equal the full forward; the cache holds the kv heads", "[nn][llama]") {
  Generator gen(91);
  const nn::Init init{.dtype = DType::f64, .generator = &gen};
  const RopeParams llama3{.theta = 10000, .llama3 = RopeLlama3Scaling{.original_max_position_embeddings = 4}};
  nn::GroupedQueryAttention attn({.n_embd = 12, .n_head = 6, .n_kv_head = 2, .rope = llama3, .init = init});
  const Tensor x = random({2, 7, 12}, 92);
  const Tensor full = attn(x);
  nn::KVCache cache(1, 9);
  // A prompt of 4 tokens, then one token at a time.
  Tensor prefill = attn.forward_cached(x.slice(1, 0, 4), cache.layers[0], 0, cache.capacity);
  REQUIRE(cache.layers[0].k.shape() == Shape{2, 2, 9, 2});
  require_close(prefill, full.slice(1, 0, 4), 1e-12, 1e-12);
  for (int64_t t = 4; t < 7; ++t)
    require_close(attn.forward_cached(x.slice(1, t, t + 1), cache.layers[0], t, cache.capacity), full.slice(1, t, t + 1),
                  1e-12, 1e-12);
  REQUIRE_THROWS_WITH(attn.forward_cached(x.slice(1, 0, 3), cache.layers[0], 7, cache.capacity),
                      Contains("positions [7, 10) exceed the KV cache's 9"));
}

TEST_CASE("RotaryEmbedding: its kept table turns as rope at the same positions", "[nn][llama]") {
  const RopeParams p{.theta = 10000, .llama3 = RopeLlama3Scaling{.original_max_position_embeddings = 16}};
  nn::RotaryEmbedding rotary({.head_dim = 8, .rope = p});
  const Tensor x = random({1, 2, 3, 8}, 95);
  require_close(rotary(x), rope(x, 0, p), 0, 0);
  // A later start needs a longer table; its rows are the same numbers.
  require_close(rotary.forward_at(x, 40), rope(x, 40, p), 0, 0);
  require_close(rotary.forward_at(ops::to_dtype(x, DType::f32), 2), rope(ops::to_dtype(x, DType::f32), 2, p), 0, 0);
  REQUIRE_THROWS_WITH(rotary(random({1, 2, 3, 6}, 96)), Contains("RotaryEmbedding: expected input [B, H, T, 8], got [1, 2, 3, 6]"));
}

TEST_CASE("LLaMA blocks: options are checked", "[nn][llama][errors]") {
  REQUIRE_THROWS_WITH(nn::GroupedQueryAttention({.n_embd = 16, .n_head = 4, .n_kv_head = 3}),
                      Contains("n_kv_head=3 must divide n_head=4"));
  REQUIRE_THROWS_WITH(nn::GroupedQueryAttention({.n_embd = 12, .n_head = 4}), Contains("head_dim must be positive and even"));
  REQUIRE_THROWS_WITH(nn::SwiGLU({.dim = 4}), Contains("SwiGLU: dim and hidden must be positive, got dim=4, hidden=0"));
  REQUIRE_THROWS_WITH(nn::RotaryEmbedding({.head_dim = 5}), Contains("head_dim must be positive and even, got 5"));
}
