// nn/: Module bookkeeping, every layer against plain f64 loops, gradchecks of the layers and of a
// tiny GPT, weight tying, the layer list the pipeline uses, state dicts, and a small CNN.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "linear_ref.h"
#include "nn/nn.h"
#include "test_util.h"

using namespace brigade;
using Catch::Contains;
using test::linear_ref;

namespace {

// ---- f64 references, written as plain loops ----

std::vector<double> layer_norm_ref(const std::vector<double>& x, int64_t dim, const std::vector<double>& w,
                                   const std::vector<double>& b, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / size_t(dim); ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[r * size_t(dim) + size_t(i)];
    mean /= double(dim);
    for (int64_t i = 0; i < dim; ++i) var += std::pow(x[r * size_t(dim) + size_t(i)] - mean, 2);
    var /= double(dim);
    for (int64_t i = 0; i < dim; ++i) {
      size_t k = r * size_t(dim) + size_t(i);
      y[k] = (x[k] - mean) / std::sqrt(var + eps) * (w.empty() ? 1.0 : w[size_t(i)]) + (b.empty() ? 0.0 : b[size_t(i)]);
    }
  }
  return y;
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// Causal multi-head attention on x [B, T, C] with qkv weight [3C, C] (rows: q, then k, then v; head
// h owns columns h*hd .. h*hd+hd-1 of each) and output projection [C, C].
std::vector<double> attention_ref(const std::vector<double>& x, int64_t B, int64_t T, int64_t C, int64_t H,
                                  const std::vector<double>& wqkv, const std::vector<double>& bqkv,
                                  const std::vector<double>& wp, const std::vector<double>& bp) {
  const int64_t hd = C / H;
  std::vector<double> qkv = linear_ref(x, B * T, C, wqkv, bqkv, 3 * C);  // [B*T, 3C]
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t d) {
    return qkv[size_t((b * T + t) * 3 * C + part * C + h * hd + d)];
  };
  std::vector<double> merged(size_t(B * T * C));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(size_t(i + 1));
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += at(b, i, 0, h, d) * at(b, j, 1, h, d);
          s[size_t(j)] = dot / std::sqrt(double(hd));
          mx = std::max(mx, s[size_t(j)]);
        }
        for (double& v : s) z += (v = std::exp(v - mx));
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += s[size_t(j)] / z * at(b, j, 2, h, d);
          merged[size_t((b * T + i) * C + h * hd + d)] = acc;
        }
      }
  return linear_ref(merged, B * T, C, wp, bp, C);
}

// Mean over rows whose target != ignore of (logsumexp(row) - row[target]).
double cross_entropy_ref(const std::vector<double>& logits, const std::vector<double>& targets, int64_t V,
                         int64_t ignore) {
  double total = 0;
  int count = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (int64_t(targets[r]) == ignore) continue;
    double mx = -1e300, z = 0;
    for (int64_t c = 0; c < V; ++c) mx = std::max(mx, logits[r * size_t(V) + size_t(c)]);
    for (int64_t c = 0; c < V; ++c) z += std::exp(logits[r * size_t(V) + size_t(c)] - mx);
    total += mx + std::log(z) - logits[r * size_t(V) + size_t(targets[r])];
    ++count;
  }
  return total / count;
}

std::vector<std::string> names_of(const nn::Named<Tensor>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

double sample_std(const Tensor& t) {
  std::vector<double> v = t.to_vector();
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / double(v.size()));
}

Tensor ids(const std::vector<double>& values, const Shape& shape) { return from_vector(values, shape, DType::i64); }

nn::GPTConfig tiny_config(DType dtype = DType::f64) {
  return nn::GPTConfig{.vocab_size = 7, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8, .dtype = dtype, .seed = 3};
}

// A module written the way a user would: two parameters, a buffer and a child.
struct Toy : nn::Module {
  Tensor scale, shift, count;
  std::shared_ptr<nn::Linear> inner;
  explicit Toy(const nn::Init& init) {
    scale = register_parameter("scale", ones({3}, init.dtype));
    inner = register_module("inner", std::make_shared<nn::Linear>(3, 2, nn::LinearOptions{.init = init}));
    shift = register_parameter("shift", zeros({3}, init.dtype));
    count = register_buffer("count", zeros({1}, DType::i64));
  }
  std::string name() const override { return "Toy"; }
  Tensor forward(const Tensor& x) override { return inner->forward(x * scale + shift); }
};

// A module with no single-tensor forward.
struct Pair : nn::Module {
  std::string name() const override { return "Pair"; }
};

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Module

TEST_CASE("Module registers parameters, buffers and children with dotted names in order", "[nn]") {
  Generator gen(1);
  Toy toy(nn::Init{.generator = &gen});
  REQUIRE(names_of(toy.named_parameters()) == std::vector<std::string>{"scale", "shift", "inner.weight", "inner.bias"});
  REQUIRE(names_of(toy.named_parameters(false)) == std::vector<std::string>{"scale", "shift"});
  REQUIRE(names_of(toy.named_buffers()) == std::vector<std::string>{"count"});
  REQUIRE(toy.parameter_count() == 3 + 3 + 6 + 2);
  REQUIRE(toy.parameters().size() == 4);
  REQUIRE(toy.parameters()[0].same_as(toy.scale));  // the registry holds the members themselves
  for (const Tensor& p : toy.parameters()) {
    REQUIRE(p.requires_grad());
    REQUIRE(p.is_leaf());
  }
  REQUIRE_FALSE(toy.count.requires_grad());

  auto children = toy.named_children();
  REQUIRE(children.size() == 1);
  REQUIRE(children[0].first == "inner");
  REQUIRE(children[0].second == toy.inner);

  nn::StateDict state = toy.state_dict();
  REQUIRE(state.size() == 5);
  REQUIRE(state.at("count").same_as(toy.count));
  REQUIRE(state.at("inner.weight").same_as(toy.inner->weight));
}

TEST_CASE("Module rejects bad registrations and has no default forward", "[nn]") {
  Pair m;
  m.register_parameter("w", zeros({2}));
  REQUIRE_THROWS_WITH(m.register_parameter("w", zeros({2})), Contains("'w' is already registered in Pair"));
  REQUIRE_THROWS_WITH(m.register_buffer("w", zeros({2})), Contains("'w' is already registered"));
  REQUIRE_THROWS_WITH(m.register_module("w", std::make_shared<nn::ReLU>()), Contains("'w' is already registered"));
  REQUIRE_THROWS_WITH(m.register_parameter("a.b", zeros({2})), Contains("invalid name 'a.b'"));
  REQUIRE_THROWS_WITH(m.register_parameter("", zeros({2})), Contains("invalid name ''"));
  REQUIRE_THROWS_WITH(m.register_parameter("i", zeros({2}, DType::i64)), Contains("'i' must be floating-point, got i64"));
  REQUIRE_THROWS_WITH(m.register_parameter("u", Tensor()), Contains("'u' is an undefined tensor"));
  REQUIRE_THROWS_WITH(m.register_module("n", std::shared_ptr<nn::Module>()), Contains("'n' is a null module"));
  {
    Tape tape;
    TapeGuard guard(tape);
    Tensor leaf = test::leaf(zeros({2}, DType::f64));
    Tensor computed = leaf * 2.0;
    REQUIRE_THROWS_WITH(m.register_parameter("c", computed), Contains("'c' was produced by a recorded op"));
  }
  REQUIRE_THROWS_WITH(m.forward(zeros({2})), Contains("Pair does not take a single tensor"));
}

TEST_CASE("train/eval is recursive and zero_grad drops gradients", "[nn]") {
  nn::GPT gpt(tiny_config());
  REQUIRE(gpt.is_training());
  gpt.eval();
  REQUIRE_FALSE(gpt.is_training());
  for (const auto& [name, m] : gpt.named_modules()) REQUIRE_FALSE(m->is_training());
  gpt.train();
  for (const auto& [name, m] : gpt.named_modules()) REQUIRE(m->is_training());

  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = gpt.loss(ids({1, 2, 3, 4}, {1, 4}), ids({2, 3, 4, 5}, {1, 4}));
  }
  tape.backward(loss);
  for (const Tensor& p : gpt.parameters()) REQUIRE(p.grad().defined());
  gpt.zero_grad();
  for (const Tensor& p : gpt.parameters()) REQUIRE_FALSE(p.grad().defined());
}

TEST_CASE("named_modules lists every descendant once with dotted names", "[nn]") {
  nn::MLP mlp(4);
  std::vector<std::string> names;
  for (const auto& [name, m] : mlp.named_modules()) names.push_back(name);
  REQUIRE(names == std::vector<std::string>{"fc", "act", "proj", "drop"});

  nn::TransformerBlock block(4, 2);
  std::set<std::string> all;
  for (const auto& [name, m] : block.named_modules()) all.insert(name);
  REQUIRE(all.count("attn.qkv"));
  REQUIRE(all.count("mlp.proj"));
  REQUIRE(all.size() == 2 + 1 + 4 + 1 + 4);  // ln1, ln2, attn (+4), mlp (+4)
}

TEST_CASE("describe prints the module tree with parameter counts", "[nn]") {
  nn::GPT gpt(tiny_config());
  std::string text = gpt.describe();
  INFO(text);
  REQUIRE(text.rfind("GPT(vocab_size=7, block_size=6, n_layer=2, n_head=2, n_embd=8)", 0) == 0);
  REQUIRE_THAT(text, Contains("\n  embed: GPTEmbedding (104 parameters)\n"));  // 7*8 + 6*8
  REQUIRE_THAT(text, Contains("\n        qkv: Linear(in=8, out=24, bias=true) (216 parameters)\n"));
  REQUIRE_THAT(text, Contains("\n    1: TransformerBlock ("));
  REQUIRE_THAT(text, Contains("act: GELU\n"));
  REQUIRE_THAT(text, Contains("drop: Dropout(p=0)"));
  nn::GPT bigger(nn::GPTConfig{.vocab_size = 100, .block_size = 8, .n_layer = 1, .n_head = 1, .n_embd = 16});
  REQUIRE_THAT(bigger.describe(), Contains("(5,040 parameters)"));  // 100*16 + 8*16 + 3280 (block) + 32
}

// ---------------------------------------------------------------------------------------------------
// Layers

TEST_CASE("Linear matches f64 loops for contiguous, strided and transposed inputs", "[nn]") {
  Generator gen(5);
  nn::Linear fc(4, 3, {.init = nn::Init{.dtype = DType::f64, .generator = &gen}});
  REQUIRE(fc.weight.shape() == Shape{3, 4});
  REQUIRE(fc.bias.shape() == Shape{3});
  test::require_close(fc.bias, std::vector<double>(3, 0.0));  // zero init
  ops::copy_(fc.bias, test::random({3}, 6));                 // make the bias matter
  std::vector<double> w = fc.weight.to_vector(), b = fc.bias.to_vector();

  Tensor x = test::random({2, 5, 4}, 7);
  std::vector<double> expected = linear_ref(x.to_vector(), 10, 4, w, b, 3);
  Tensor y = fc(x);
  REQUIRE(y.shape() == Shape{2, 5, 3});
  test::require_close(y, expected, 1e-12, 1e-12);
  test::require_close(fc(test::strided(x)), expected, 1e-12, 1e-12);
  test::require_close(fc(test::transposed(x)), expected, 1e-12, 1e-12);

  // hand-checked: weight rows [1, 2, 3, 4], [0, 0, 0, 1], [-1, 0, 1, 0] and bias [0.5, 0, -1]
  ops::copy_(fc.weight, tensor({{1, 2, 3, 4}, {0, 0, 0, 1}, {-1, 0, 1, 0}}, DType::f64));
  ops::copy_(fc.bias, tensor({0.5, 0, -1}, DType::f64));
  test::require_close(fc(tensor({{1, 1, 1, 1}, {2, 0, -1, 3}}, DType::f64)), {10.5, 1, -1, 11.5, 3, -4});

  nn::Linear plain(4, 2, {.bias = false, .init = nn::Init{.dtype = DType::f64, .generator = &gen}});
  REQUIRE_FALSE(plain.bias.defined());
  REQUIRE(names_of(plain.named_parameters()) == std::vector<std::string>{"weight"});
  test::require_close(plain(x), linear_ref(x.to_vector(), 10, 4, plain.weight.to_vector(), {}, 2), 1e-12, 1e-12);

  REQUIRE_THROWS_WITH(fc(zeros({2, 5}, DType::f64)), Contains("Linear: input shape [2, 5] does not end in in_features=4"));
  REQUIRE_THROWS_WITH(nn::Linear(0, 3), Contains("Linear: sizes must be positive"));
}

TEST_CASE("Linear initialises U(-1/sqrt(in), 1/sqrt(in)) by default and N(0, std) on request", "[nn]") {
  Generator gen(9);
  nn::Linear fc(16, 64, {.init = nn::Init{.generator = &gen}});
  REQUIRE(fc.weight.dtype() == DType::f32);
  double bound = 1.0 / 4.0, lo = 1, hi = -1;
  for (double v : fc.weight.to_vector()) lo = std::min(lo, v), hi = std::max(hi, v);
  REQUIRE(lo >= -bound);
  REQUIRE(hi < bound);
  REQUIRE(hi - lo > 1.8 * bound);  // 1024 draws fill the range
  REQUIRE(std::abs(sample_std(fc.weight) - bound / std::sqrt(3.0)) < 0.1 * bound);

  nn::Linear gpt_style(64, 64, {.init = nn::Init{.generator = &gen, .std = 0.02}});
  REQUIRE(std::abs(sample_std(gpt_style.weight) - 0.02) < 0.002);
}

TEST_CASE("the same generator seed gives the same weights in every dtype", "[nn]") {
  Generator a(11), b(11), c(12);
  nn::Linear fa(5, 6, {.init = nn::Init{.dtype = DType::f32, .generator = &a}});
  nn::Linear fb(5, 6, {.init = nn::Init{.dtype = DType::f64, .generator = &b}});
  nn::Linear fc(5, 6, {.init = nn::Init{.dtype = DType::f32, .generator = &c}});
  test::require_close(fa.weight, fb.weight.to_vector(), 1e-7, 1e-6);  // the f64 values rounded to f32
  REQUIRE(fa.weight.to_vector() != fc.weight.to_vector());
  REQUIRE(a.offset == 30);  // one counter per weight element; the zero bias draws nothing

  // The default generator is used when none is given, and manual_seed makes it reproducible.
  manual_seed(77);
  nn::Linear d1(3, 3);
  manual_seed(77);
  nn::Linear d2(3, 3);
  test::require_equal(d1.weight, d2.weight);
}

TEST_CASE("Linear gradcheck (weight, bias, input) and split backward equals full backward", "[nn]") {
  Generator gen(13);
  nn::Linear fc(3, 2, {.init = nn::Init{.dtype = DType::f64, .generator = &gen}});
  ops::copy_(fc.bias, test::random({2}, 14));
  Tensor x = test::leaf(test::random({4, 3}, 15));
  auto f = [&](const std::vector<Tensor>& in) { return fc(in[0]); };
  auto result = gradcheck(f, {x, fc.weight, fc.bias});
  INFO(result.message);
  REQUIRE(result.ok);

  // The zero-bubble pipeline asks for input grads and weight grads separately.
  Tensor gy = test::random({4, 2}, 16);
  std::vector<std::vector<double>> whole;
  for (Tensor t : {x, fc.weight, fc.bias}) t.zero_grad();  // gradcheck left its own gradients
  {
    Tape tape;
    Tensor y;
    {
      TapeGuard guard(tape);
      y = fc(x);
    }
    tape.backward({y}, {gy});
    for (const Tensor& t : {x, fc.weight, fc.bias}) whole.push_back(t.grad().to_vector());
  }
  for (Tensor t : {x, fc.weight, fc.bias}) t.zero_grad();
  Tape tape;
  Tensor y;
  {
    TapeGuard guard(tape);
    y = fc(x);
  }
  tape.backward_input({y}, {gy}, {x});
  REQUIRE(x.grad().to_vector() == whole[0]);
  tape.backward_weight();
  REQUIRE(fc.weight.grad().to_vector() == whole[1]);
  REQUIRE(fc.bias.grad().to_vector() == whole[2]);
}

TEST_CASE("Embedding looks up rows and initialises N(0, 1) or N(0, std)", "[nn]") {
  Generator gen(17);
  nn::Embedding emb(5, 3, nn::Init{.dtype = DType::f64, .generator = &gen});
  REQUIRE(emb.weight.shape() == Shape{5, 3});
  std::vector<double> w = emb.weight.to_vector();
  Tensor idx = ids({4, 0, 4, 2}, {2, 2});
  Tensor y = emb(idx);
  REQUIRE(y.shape() == Shape{2, 2, 3});
  std::vector<double> expected;
  for (int r : {4, 0, 4, 2})
    for (int d = 0; d < 3; ++d) expected.push_back(w[size_t(r * 3 + d)]);
  test::require_close(y, expected, 0, 0);
  test::require_close(emb(from_vector(std::vector<double>{4, 0, 4, 2}, {2, 2}, DType::i32)), expected, 0, 0);

  nn::Embedding wide(100, 100, nn::Init{.generator = &gen});
  REQUIRE(std::abs(sample_std(wide.weight) - 1.0) < 0.05);
  nn::Embedding small(100, 100, nn::Init{.generator = &gen, .std = 0.02});
  REQUIRE(std::abs(sample_std(small.weight) - 0.02) < 0.001);

  REQUIRE_THROWS_AS(emb(ids({5}, {1})), Error);  // out of range
}

TEST_CASE("LayerNorm and RMSNorm match f64 loops; LayerNorm gradcheck", "[nn]") {
  Generator gen(19);
  nn::Init init{.dtype = DType::f64, .generator = &gen};
  nn::LayerNorm ln(5, {.init = init});
  test::require_close(ln.weight, std::vector<double>(5, 1.0), 0, 0);
  test::require_close(ln.bias, std::vector<double>(5, 0.0), 0, 0);
  ops::copy_(ln.weight, test::random({5}, 20));
  ops::copy_(ln.bias, test::random({5}, 21));
  Tensor x = test::random({3, 2, 5}, 22);
  std::vector<double> expected = layer_norm_ref(x.to_vector(), 5, ln.weight.to_vector(), ln.bias.to_vector(), 1e-5);
  test::require_close(ln(x), expected, 1e-10, 1e-10);
  test::require_close(ln(test::strided(x)), expected, 1e-10, 1e-10);

  nn::LayerNorm bare(5, {.affine = false, .init = init});
  REQUIRE(bare.parameters().empty());
  test::require_close(bare(x), layer_norm_ref(x.to_vector(), 5, {}, {}, 1e-5), 1e-10, 1e-10);
  nn::LayerNorm no_bias(5, {.bias = false, .init = init});
  REQUIRE(names_of(no_bias.named_parameters()) == std::vector<std::string>{"weight"});
  test::require_close(no_bias(x), layer_norm_ref(x.to_vector(), 5, {}, {}, 1e-5), 1e-10, 1e-10);

  nn::RMSNorm rms(5, {.init = init});
  ops::copy_(rms.weight, test::random({5}, 23));
  std::vector<double> xv = x.to_vector(), wv = rms.weight.to_vector(), ref(xv.size());
  for (size_t r = 0; r < 6; ++r) {
    double ms = 0;
    for (size_t i = 0; i < 5; ++i) ms += xv[r * 5 + i] * xv[r * 5 + i] / 5;
    for (size_t i = 0; i < 5; ++i) ref[r * 5 + i] = xv[r * 5 + i] / std::sqrt(ms + 1e-6) * wv[i];
  }
  test::require_close(rms(x), ref, 1e-10, 1e-10);
  test::require_close(rms(test::strided(x)), ref, 1e-10, 1e-10);

  Tensor xl = test::leaf(test::random({2, 5}, 25));
  auto result = gradcheck([&](const std::vector<Tensor>& in) { return ln(in[0]); }, {xl, ln.weight, ln.bias});
  INFO(result.message);
  REQUIRE(result.ok);
  auto rms_result = gradcheck([&](const std::vector<Tensor>& in) { return rms(in[0]); }, {xl, rms.weight});
  INFO(rms_result.message);
  REQUIRE(rms_result.ok);

  REQUIRE_THROWS_WITH(ln(zeros({2, 4}, DType::f64)), Contains("LayerNorm: input shape [2, 4] does not end in dim=5"));
  REQUIRE_THROWS_WITH(rms(zeros({4}, DType::f64)), Contains("RMSNorm: input shape [4] does not end in dim=5"));
}

TEST_CASE("activations match their formulas", "[nn]") {
  Tensor x = tensor({-3, -1, -0.5, 0, 0.25, 1, 2.5}, DType::f64);
  std::vector<double> xv = x.to_vector(), relu_ref, gelu_v, silu_ref;
  for (double v : xv) {
    relu_ref.push_back(v > 0 ? v : 0);
    gelu_v.push_back(gelu_ref(v));
    silu_ref.push_back(v / (1 + std::exp(-v)));
  }
  test::require_close(nn::ReLU()(x), relu_ref, 1e-12, 1e-12);
  test::require_close(nn::GELU()(x), gelu_v, 1e-12, 1e-12);
  test::require_close(nn::SiLU()(x), silu_ref, 1e-12, 1e-12);
  test::require_close(nn::GELU()(test::strided(x)), gelu_v, 1e-12, 1e-12);
}

TEST_CASE("Dropout drops in training mode and is the identity in eval mode", "[nn]") {
  manual_seed(21);
  nn::Dropout drop(0.25);
  Tensor x = ones({4000}, DType::f64);
  std::vector<double> y = drop(x).to_vector();
  int zeros_seen = 0;
  for (double v : y) {
    REQUIRE((v == 0 || std::abs(v - 1 / 0.75) < 1e-12));
    zeros_seen += v == 0;
  }
  REQUIRE(zeros_seen > 800);
  REQUIRE(zeros_seen < 1200);
  REQUIRE(drop(x).to_vector() != y);  // a fresh mask each call

  drop.eval();
  REQUIRE(drop(x).same_as(x));
  drop.train();
  REQUIRE_FALSE(drop(x).same_as(x));
  REQUIRE(nn::Dropout(0.0)(x).same_as(x));
  REQUIRE_THROWS_WITH(nn::Dropout(1.0), Contains("Dropout: p must be in [0, 1), got 1"));
}

TEST_CASE("Sequential chains modules and names them by position", "[nn]") {
  Generator gen(23);
  nn::Init init{.dtype = DType::f64, .generator = &gen};
  auto fc1 = std::make_shared<nn::Linear>(3, 4, nn::LinearOptions{.init = init});
  auto fc2 = std::make_shared<nn::Linear>(4, 2, nn::LinearOptions{.bias = false, .init = init});
  nn::Sequential seq{fc1, std::make_shared<nn::ReLU>(), fc2};
  REQUIRE(seq.size() == 3);
  REQUIRE(seq[0] == fc1);
  REQUIRE(names_of(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight"});

  Tensor x = test::random({5, 3}, 24);
  std::vector<double> h = linear_ref(x.to_vector(), 5, 3, fc1->weight.to_vector(), fc1->bias.to_vector(), 4);
  for (double& v : h) v = std::max(v, 0.0);
  test::require_close(seq(x), linear_ref(h, 5, 4, fc2->weight.to_vector(), {}, 2), 1e-12, 1e-12);
  REQUIRE_THROWS_WITH(seq[3], Contains("Sequential: index 3 is out of range for 3 modules"));
  REQUIRE_THROWS_WITH(nn::Sequential{std::make_shared<Pair>()}.forward(x), Contains("Pair does not take a single tensor"));
}

TEST_CASE("MLP is Linear -> GELU -> Linear with hidden 4*dim, and passes gradcheck", "[nn]") {
  Generator gen(25);
  nn::MLP mlp(3, {.init = {.dtype = DType::f64, .generator = &gen}});
  REQUIRE(mlp.fc->weight.shape() == Shape{12, 3});
  REQUIRE(mlp.proj->weight.shape() == Shape{3, 12});
  ops::copy_(mlp.fc->bias, test::random({12}, 26));
  Tensor x = test::random({2, 3}, 27);
  std::vector<double> h = linear_ref(x.to_vector(), 2, 3, mlp.fc->weight.to_vector(), mlp.fc->bias.to_vector(), 12);
  for (double& v : h) v = gelu_ref(v);
  test::require_close(mlp(x), linear_ref(h, 2, 12, mlp.proj->weight.to_vector(), mlp.proj->bias.to_vector(), 3),
                      1e-12, 1e-12);

  Tensor xl = test::leaf(x);
  auto result = gradcheck([&](const std::vector<Tensor>& in) { return mlp(in[0]); }, {xl, mlp.fc->weight, mlp.proj->bias});
  INFO(result.message);
  REQUIRE(result.ok);
}

// ---------------------------------------------------------------------------------------------------
// Attention and transformer blocks

TEST_CASE("CausalSelfAttention matches an f64 loop reference", "[nn]") {
  Generator gen(29);
  const int64_t B = 2, T = 5, C = 6, H = 3;
  nn::CausalSelfAttention attn(C, H, {.init = {.dtype = DType::f64, .generator = &gen}});
  ops::copy_(attn.qkv->bias, test::random({3 * C}, 30, DType::f64, 0.5));
  ops::copy_(attn.proj->bias, test::random({C}, 31));
  Tensor x = test::random({B, T, C}, 32);
  std::vector<double> expected = attention_ref(x.to_vector(), B, T, C, H, attn.qkv->weight.to_vector(),
                                               attn.qkv->bias.to_vector(), attn.proj->weight.to_vector(),
                                               attn.proj->bias.to_vector());
  for (bool fused : {true, false}) {
    INFO((fused ? "fused" : "composed"));
    attn.fused = fused;
    Tensor y = attn(x);
    REQUIRE(y.shape() == Shape{B, T, C});
    test::require_close(y, expected, 1e-10, 1e-10);
    test::require_close(attn(test::strided(x)), expected, 1e-10, 1e-10);
    test::require_close(attn(test::transposed(x)), expected, 1e-10, 1e-10);
  }

  REQUIRE_THROWS_WITH(attn(zeros({2, 5}, DType::f64)), Contains("CausalSelfAttention: expected input [B, T, 6], got [2, 5]"));
  REQUIRE_THROWS_WITH(nn::CausalSelfAttention(6, 4), Contains("n_embd=6 must be a positive multiple of n_head=4"));
}

TEST_CASE("fused and composed attention agree in a GPT: loss, every gradient, dropout, the KV cache", "[nn]") {
  nn::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 70;  // past the fused kernel's 64-query blocks
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.dropout = 0.2;
  c.dtype = DType::f64;
  c.seed = 3;
  Generator data(4);
  const Tensor idx = ops::to_dtype(uniform({2, 70}, 0, 10.99, DType::f64, Device::cpu(), &data), DType::i64);
  const Tensor targets = ops::to_dtype(uniform({2, 70}, 0, 10.99, DType::f64, Device::cpu(), &data), DType::i64);
  std::vector<double> losses;
  std::vector<std::vector<double>> grads;
  for (bool fused : {true, false}) {
    c.fused_attention = fused;
    nn::GPT model(c);
    manual_seed(9);  // the same dropout stream for both
    Tape tape;
    const Tensor loss = tape.record([&] { return model.loss(idx, targets); });
    tape.backward(loss);
    losses.push_back(loss.item());
    std::vector<double> all;
    for (const Tensor& p : model.parameters()) {
      const std::vector<double> g = p.grad().to_vector();
      all.insert(all.end(), g.begin(), g.end());
    }
    grads.push_back(all);
  }
  CHECK(losses[0] == Approx(losses[1]).epsilon(1e-12));
  REQUIRE(grads[0].size() == grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) REQUIRE(std::abs(grads[0][i] - grads[1][i]) < 1e-11);
  // A changed dropout stream changes the fused loss: the mask is really drawn.
  c.fused_attention = true;
  nn::GPT model(c);
  manual_seed(10);
  CHECK(model.loss(idx, targets).item() != Approx(losses[0]).epsilon(1e-9));
}

TEST_CASE("CausalSelfAttention is causal: changing position t leaves earlier outputs unchanged", "[nn]") {
  Generator gen(33);
  nn::CausalSelfAttention attn(4, 2, {.init = {.dtype = DType::f64, .generator = &gen}});
  Tensor x = test::random({1, 6, 4}, 34);
  Tensor changed = ops::clone(x);
  ops::copy_(changed.select(1, 3), test::random({4}, 35));  // position 3 only
  std::vector<double> a = attn(x).to_vector(), b = attn(changed).to_vector();
  for (size_t i = 0; i < 3 * 4; ++i) REQUIRE(std::abs(a[i] - b[i]) < 1e-13);  // positions 0..2
  bool later_changed = false;
  for (size_t i = 3 * 4; i < a.size(); ++i) later_changed |= std::abs(a[i] - b[i]) > 1e-6;
  REQUIRE(later_changed);
}

TEST_CASE("CausalSelfAttention and TransformerBlock pass gradcheck", "[nn]") {
  Generator gen(37);
  nn::Init init{.dtype = DType::f64, .generator = &gen, .std = 0.5};
  nn::CausalSelfAttention attn(4, 2, {.init = init});
  ops::copy_(attn.qkv->bias, test::random({12}, 38, DType::f64, 0.3));
  Tensor x = test::leaf(test::random({2, 3, 4}, 39));
  auto result = gradcheck([&](const std::vector<Tensor>& in) { return attn(in[0]); },
                          {x, attn.qkv->weight, attn.qkv->bias, attn.proj->weight});
  INFO(result.message);
  REQUIRE(result.ok);

  nn::TransformerBlock block(4, 2, {.init = init});
  ops::copy_(block.ln1->weight, test::random({4}, 40));
  ops::copy_(block.ln2->bias, test::random({4}, 41));
  auto block_result = gradcheck([&](const std::vector<Tensor>& in) { return block(in[0]); },
                                {x, block.ln1->weight, block.attn->qkv->weight, block.ln2->bias, block.mlp->proj->weight});
  INFO(block_result.message);
  REQUIRE(block_result.ok);
}

TEST_CASE("TransformerBlock is pre-norm: x + attn(ln1(x)), then + mlp(ln2(.))", "[nn]") {
  Generator gen(43);
  nn::TransformerBlock block(4, 2, {.init = {.dtype = DType::f64, .generator = &gen}});
  Tensor x = test::random({2, 3, 4}, 44);
  // Recompose from the sub-modules (each verified separately above) with plain f64 additions.
  std::vector<double> xv = x.to_vector(), a = block.attn->forward(block.ln1->forward(x)).to_vector();
  std::vector<double> h(xv.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = xv[i] + a[i];
  Tensor ht = from_vector(h, {2, 3, 4}, DType::f64);
  std::vector<double> m = block.mlp->forward(block.ln2->forward(ht)).to_vector();
  for (size_t i = 0; i < h.size(); ++i) h[i] += m[i];
  test::require_close(block(x), h, 1e-12, 1e-12);
}

// ---------------------------------------------------------------------------------------------------
// GPT

TEST_CASE("GPT parameter names follow registration order and the count matches the formula", "[nn]") {
  for (bool bias : {true, false}) {
    nn::GPTConfig c{.vocab_size = 11, .block_size = 9, .n_layer = 3, .n_head = 2, .n_embd = 8, .bias = bias};
    nn::GPT gpt(c);
    const int64_t V = 11, P = 9, L = 3, C = 8, b = bias ? 1 : 0;
    int64_t per_block = (C + b * C)                     // ln1
                        + (3 * C * C + b * 3 * C)       // attn.qkv
                        + (C * C + b * C)               // attn.proj
                        + (C + b * C)                   // ln2
                        + (4 * C * C + b * 4 * C)       // mlp.fc
                        + (4 * C * C + b * C);          // mlp.proj
    int64_t expected = V * C + P * C + L * per_block + (C + b * C);  // + ln_f; the head's wte is tied
    REQUIRE(gpt.parameter_count() == expected);

    std::vector<std::string> names = names_of(gpt.named_parameters());
    std::vector<std::string> block0 = {"ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias",
                                       "attn.proj.weight", "attn.proj.bias", "ln2.weight", "ln2.bias",
                                       "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"};
    std::vector<std::string> want = {"embed.wte.weight", "embed.wpe.weight"};
    for (int l = 0; l < 3; ++l)
      for (const std::string& n : block0)
        if (bias || n.find(".bias") == std::string::npos) want.push_back("blocks." + std::to_string(l) + "." + n);
    want.push_back("head.ln_f.weight");
    if (bias) want.push_back("head.ln_f.bias");
    REQUIRE(names == want);
    REQUIRE(gpt.state_dict().size() == want.size());
  }
}

TEST_CASE("GPT initialisation: N(0, 0.02), scaled residual projections, zero biases, unit norms", "[nn]") {
  nn::GPT gpt(nn::GPTConfig{.vocab_size = 64, .block_size = 64, .n_layer = 8, .n_head = 4, .n_embd = 64});
  const double residual = 0.02 / std::sqrt(16.0);
  REQUIRE(std::abs(sample_std(gpt.embed->wte->weight) - 0.02) < 0.002);
  REQUIRE(std::abs(sample_std(gpt.embed->wpe->weight) - 0.02) < 0.002);
  for (const auto& [name, p] : gpt.named_parameters()) {
    INFO(name);
    std::vector<double> v = p.to_vector();
    if (name.ends_with(".bias")) {
      REQUIRE(v == std::vector<double>(v.size(), 0.0));
    } else if (name.find("ln") != std::string::npos) {
      REQUIRE(v == std::vector<double>(v.size(), 1.0));
    } else if (name.ends_with("proj.weight")) {
      REQUIRE(std::abs(sample_std(p) - residual) < 0.1 * residual);
    } else if (name.ends_with("fc.weight") || name.ends_with("qkv.weight")) {
      REQUIRE(std::abs(sample_std(p) - 0.02) < 0.002);
    }
  }
}

TEST_CASE("GPT weights depend only on the config seed, in any dtype", "[nn]") {
  nn::GPTConfig c = tiny_config(DType::f32);
  manual_seed(1);
  nn::GPT a(c);
  manual_seed(2);  // the default generator plays no part
  nn::GPT b(c);
  for (const auto& [name, t] : a.state_dict()) test::require_equal(b.state_dict().at(name), t);
  nn::GPT d(tiny_config(DType::f64));
  for (const auto& [name, t] : a.state_dict()) test::require_close(d.state_dict().at(name), t.to_vector(), 1e-8, 1e-6);
  c.seed = 4;
  nn::GPT e(c);
  REQUIRE(e.embed->wte->weight.to_vector() != a.embed->wte->weight.to_vector());

  // The f32 and f64 models compute the same function, up to f32 rounding; bf16 roughly so.
  Tensor idx = ids({0, 6, 2, 2, 5, 1, 3, 4}, {2, 4});
  test::require_close(a(idx), d(idx).to_vector(), 1e-4, 1e-3);
  nn::GPT h(tiny_config(DType::bf16));
  Tensor logits = h(idx);
  REQUIRE(logits.dtype() == DType::bf16);
  test::require_close(logits, d(idx).to_vector(), 2e-2, 2e-2);
}

TEST_CASE("named streams: the hash and the key are the documented ones", "[nn][init]") {
  // FNV-1a 64's published values.
  REQUIRE(name_hash("") == 0xcbf29ce484222325ull);
  REQUIRE(name_hash("a") == 0xaf63dc4c8601ec8cull);
  REQUIRE(name_hash("foobar") == 0x85944171f73967e8ull);
  // stream_key(seed, name) = mix(seed ^ mix(name_hash(name))), mix = SplitMix64's finaliser (core/rng.h).
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (uint64_t seed : {0ull, 3ull, 0x123456789abcdefull})
    for (const char* name : {"embed.wte.weight", "blocks.3.attn.qkv.weight", "x"}) {
      INFO(seed << " " << name);
      REQUIRE(stream_key(seed, name) == mix(seed ^ mix(name_hash(name))));
      REQUIRE(named_generator(seed, name).seed == stream_key(seed, name));
      REQUIRE(named_generator(seed, name).offset == 0);
    }
  REQUIRE(stream_key(3, "blocks.1.mlp.fc.weight") != stream_key(3, "blocks.10.mlp.fc.weight"));
  REQUIRE(stream_key(3, "a") != stream_key(4, "a"));
}

TEST_CASE("Init::keyed: a layer's weights are its name's stream, whatever was built before", "[nn][init]") {
  const nn::Init keyed = nn::Init::keyed(9, nn::Init{.dtype = DType::f64});
  // Built in either order, "fc" and "out" draw the same numbers.
  nn::Linear fc_first(4, 3, {.init = keyed.at("fc")});
  nn::Linear out_second(3, 2, {.init = keyed.at("out")});
  nn::Linear out_first(3, 2, {.init = keyed.at("out")});
  nn::Linear fc_second(4, 3, {.init = keyed.at("fc")});
  test::require_equal(fc_first.weight, fc_second.weight);
  test::require_equal(out_first.weight, out_second.weight);
  // ... and they are element 0.. of named_generator(9, "<name>.weight"): U(-1/sqrt(in), 1/sqrt(in)).
  Generator fc_stream = named_generator(9, "fc.weight");
  test::require_equal(fc_first.weight, uniform({3, 4}, -0.5, 0.5, DType::f64, Device::cpu(), &fc_stream));
  REQUIRE(fc_first.bias.to_vector() == std::vector<double>(3, 0.0));
  // A layer built on its own is the whole model: its weight's full name is "weight".
  nn::Linear alone(4, 3, {.init = keyed});
  Generator alone_stream = named_generator(9, "weight");
  test::require_equal(alone.weight, uniform({3, 4}, -0.5, 0.5, DType::f64, Device::cpu(), &alone_stream));
  // A draw by name needs a name.
  REQUIRE_THROWS_WITH(nn::init::normal({2}, 1.0, keyed), Contains("needs the parameter's name"));
  // Construction order stays the plain way: the same Generator, consumed in turn.
  Generator a(5), b(5);
  nn::Linear first(4, 3, {.init = nn::Init{.dtype = DType::f64, .generator = &a}});
  nn::Linear again(4, 3, {.init = nn::Init{.dtype = DType::f64, .generator = &b}});
  test::require_equal(first.weight, again.weight);
  nn::Linear next(4, 3, {.init = nn::Init{.dtype = DType::f64, .generator = &a}});
  REQUIRE(next.weight.to_vector() != first.weight.to_vector());
}

TEST_CASE("GPT initial values: every parameter from the stream of (seed, its full name)", "[nn][init]") {
  // f64 parameters: the stream's values times the std, exactly.
  const nn::GPTConfig c = tiny_config(DType::f64);
  nn::GPT gpt(c);
  const double residual = 0.02 / std::sqrt(2.0 * double(c.n_layer));
  int random = 0;
  for (const auto& [name, p] : gpt.named_parameters()) {
    INFO(name);
    if (name.ends_with(".bias")) {
      REQUIRE(p.to_vector() == std::vector<double>(size_t(p.numel()), 0.0));
    } else if (name.find("ln") != std::string::npos) {
      REQUIRE(p.to_vector() == std::vector<double>(size_t(p.numel()), 1.0));
    } else {
      const double std = name.ends_with("proj.weight") ? residual : 0.02;
      Generator stream = named_generator(c.seed, name);
      std::vector<double> want = randn(p.shape(), DType::f64, Device::cpu(), &stream).to_vector();
      for (double& v : want) v *= std;
      REQUIRE(p.to_vector() == want);
      ++random;
    }
  }
  REQUIRE(random == 2 + 4 * c.n_layer);  // wte, wpe; qkv, attn.proj, fc, mlp.proj per block
}

namespace {

// The parameter elements of each layer of layers(grain), written out here from the shapes.
std::vector<int64_t> layer_sizes(const nn::GPTConfig& c, nn::LayerGrain grain) {
  const int64_t C = c.n_embd, b = c.bias ? 1 : 0, V = c.vocab_size;
  const int64_t attention = (C + b * C) + (3 * C * C + b * 3 * C) + (C * C + b * C);  // ln1, qkv, proj
  const int64_t mlp = (C + b * C) + (4 * C * C + b * 4 * C) + (4 * C * C + b * C);    // ln2, fc, proj
  std::vector<int64_t> out{V * C + c.block_size * C};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    if (grain == nn::LayerGrain::block) out.push_back(attention + mlp);
    else out.insert(out.end(), {attention, mlp});
  }
  out.push_back((C + b * C) + V * C);  // ln_f and the tied table
  return out;
}

}  // namespace

TEST_CASE("a GPT holding some layers: the whole GPT's parameters there, by name and bit for bit", "[nn][init]") {
  for (bool bias : {true, false}) {
    const nn::GPTConfig c{.vocab_size = 11, .block_size = 9, .n_layer = 3, .n_head = 2, .n_embd = 8, .bias = bias,
                          .seed = 21};
    const nn::GPT whole(c);
    std::map<std::string, std::vector<double>> want;
    for (const auto& [name, p] : whole.named_parameters()) want[name] = p.to_vector();
    for (nn::LayerGrain grain : {nn::LayerGrain::block, nn::LayerGrain::half_block}) {
      const int64_t n = nn::GPT::layer_count(c, grain), last = n - 1;
      REQUIRE(n == (grain == nn::LayerGrain::block ? 5 : 8));
      // The layer sizes from the config are the whole model's layers' own.
      const std::vector<int64_t> sizes = layer_sizes(c, grain);
      REQUIRE(nn::GPT::layer_parameter_counts(c, grain) == sizes);
      const auto whole_layers = whole.layers(grain);
      for (int64_t i = 0; i < n; ++i) REQUIRE(whole_layers[size_t(i)]->parameter_count() == sizes[size_t(i)]);
      REQUIRE(nn::GPT::whole_parameter_count(c) == whole.parameter_count());

      std::vector<std::vector<int64_t>> sets = {{}, {0}, {last}, {0, last}, {1}, {1, 2}, {2, last}, {0, 1, 2},
                                                {last - 1, last}, {1, last - 1}};
      std::vector<int64_t> all;
      for (int64_t i = 0; i < n; ++i) all.push_back(i);
      sets.push_back(all);
      for (const std::vector<int64_t>& held : sets) {
        std::string label;
        for (int64_t i : held) label += std::to_string(i) + " ";
        INFO((grain == nn::LayerGrain::block ? "blocks" : "halves") << ", bias " << bias << ", holding " << label);
        nn::GPT part(c, grain, held);
        REQUIRE(part.is_whole() == (held.size() == size_t(n)));
        // Exactly the held layers are there.
        const auto layers = part.layers(grain);
        REQUIRE(int64_t(layers.size()) == n);
        for (int64_t i = 0; i < n; ++i)
          REQUIRE((layers[size_t(i)] != nullptr) == (std::find(held.begin(), held.end(), i) != held.end()));
        // Every parameter has its whole-model name and value; a head without the embedding holds the
        // tied table as "embed.wte.weight", the embedding's own bits.
        const bool tied_only = std::find(held.begin(), held.end(), last) != held.end() &&
                               std::find(held.begin(), held.end(), int64_t(0)) == held.end();
        bool has_wte = false;
        for (const auto& [name, p] : part.named_parameters()) {
          INFO(name);
          REQUIRE(want.count(name));
          REQUIRE(p.to_vector() == want.at(name));
          has_wte = has_wte || name == "embed.wte.weight";
        }
        if (tied_only) {
          REQUIRE(has_wte);
          REQUIRE(part.embed->wpe == nullptr);
          REQUIRE(part.head->wte.same_as(part.embed->wte->weight));
        }
        // Only the held layers' parameters are allocated: their sizes, the tied table once.
        int64_t expected = 0;
        for (int64_t i : held) expected += sizes[size_t(i)];
        const bool both_ends = std::find(held.begin(), held.end(), int64_t(0)) != held.end() &&
                               std::find(held.begin(), held.end(), last) != held.end();
        if (both_ends) expected -= c.vocab_size * c.n_embd;
        REQUIRE(part.parameter_count() == expected);
        if (!part.is_whole() && !held.empty())
          REQUIRE_THROWS_WITH(part.forward(ids({1, 2}, {1, 2})), Contains("holds only some of its layers"));
      }
    }
  }
  REQUIRE_THROWS_WITH(nn::GPT(tiny_config(), nn::LayerGrain::block, {4}), Contains("layer 4 is outside 0..3"));
  // One half of a block cannot run as a block.
  const nn::GPT half(tiny_config(), nn::LayerGrain::half_block, {1});
  REQUIRE(half.block(0)->has_attention());
  REQUIRE_FALSE(half.block(0)->has_mlp());
  REQUIRE(half.block(1) == nullptr);
  REQUIRE_THROWS_WITH(half.block(0)->forward(zeros({1, 2, 8}, DType::f64)), Contains("only its attention half"));
}

TEST_CASE("a GPT's layers held apart and chained equal the whole GPT's forward", "[nn][init]") {
  const nn::GPTConfig c = tiny_config();
  const nn::GPT whole(c);
  const nn::GPT front(c, nn::LayerGrain::half_block, {0, 1, 2, 3});
  const nn::GPT back(c, nn::LayerGrain::half_block, {4, 5});
  Tensor h = ids({0, 6, 2, 2, 5, 1, 3, 4}, {2, 4});
  const auto a = front.layers(nn::LayerGrain::half_block), b = back.layers(nn::LayerGrain::half_block);
  for (size_t i = 0; i < a.size(); ++i) h = (*(a[i] ? a[i] : b[i]))(h);
  Tensor expected = ids({0, 6, 2, 2, 5, 1, 3, 4}, {2, 4});
  for (const auto& layer : whole.layers(nn::LayerGrain::half_block)) expected = (*layer)(expected);
  test::require_equal(h, expected);
}

TEST_CASE("GPT forward shapes, loss against an f64 reference, and bad inputs", "[nn]") {
  nn::GPT gpt(tiny_config());
  Tensor idx = ids({0, 6, 2, 2, 5, 1, 3, 4, 4, 0}, {2, 5});
  Tensor logits = gpt(idx);
  REQUIRE(logits.shape() == Shape{2, 5, 7});
  REQUIRE(logits.dtype() == DType::f64);

  std::vector<double> targets = {6, 2, -1, 5, 1, -1, -1, 4, 0, 3};
  Tensor loss = gpt.loss(idx, ids(targets, {2, 5}));
  REQUIRE(loss.numel() == 1);
  REQUIRE(std::abs(loss.item() - cross_entropy_ref(logits.to_vector(), targets, 7, -1)) < 1e-10);

  // The full block_size works; more does not.
  REQUIRE(gpt(ids(std::vector<double>(6, 1), {1, 6})).shape() == Shape{1, 6, 7});
  REQUIRE_THROWS_WITH(gpt(ids(std::vector<double>(7, 1), {1, 7})), Contains("GPT: sequence length 7 exceeds block_size 6"));
  REQUIRE_THROWS_WITH(gpt(zeros({2, 3}, DType::f32)), Contains("GPT: expected token ids [B, T] (i32/i64), got [2, 3] f32"));
  REQUIRE_THROWS_WITH(gpt(ids({1, 2}, {2})), Contains("expected token ids [B, T]"));
  REQUIRE_THROWS_WITH(gpt.loss(idx, ids({1, 2}, {1, 2})), Contains("GPT::loss: targets shape [1, 2] differs from idx shape [2, 5]"));
  REQUIRE_THROWS_AS(gpt(ids({7}, {1, 1})), Error);  // token id out of range
  REQUIRE_THROWS_WITH(nn::GPT(nn::GPTConfig{.n_head = 3, .n_embd = 8}), Contains("GPT: n_embd=8 must be divisible by n_head=3"));
  REQUIRE_THROWS_WITH(nn::GPT(nn::GPTConfig{.vocab_size = 0}), Contains("must be positive"));
}

TEST_CASE("GPT is causal: changing a future token leaves earlier logits unchanged", "[nn]") {
  nn::GPT gpt(tiny_config());
  std::vector<double> tokens = {3, 1, 4, 1, 5, 2};
  std::vector<double> a = gpt(ids(tokens, {1, 6})).to_vector();
  tokens[4] = 6;
  std::vector<double> b = gpt(ids(tokens, {1, 6})).to_vector();
  for (size_t i = 0; i < 4 * 7; ++i) REQUIRE(std::abs(a[i] - b[i]) < 1e-12);
  bool changed = false;
  for (size_t i = 4 * 7; i < a.size(); ++i) changed |= std::abs(a[i] - b[i]) > 1e-9;
  REQUIRE(changed);
}

TEST_CASE("GPT::layers() run in order equal GPT::forward", "[nn]") {
  nn::GPT gpt(tiny_config());
  auto layers = gpt.layers();
  REQUIRE(layers.size() == 2 + 2);
  REQUIRE(layers.front() == gpt.embed);
  REQUIRE(layers[1] == (*gpt.blocks)[0]);
  REQUIRE(layers.back() == gpt.head);

  Tensor idx = ids({0, 6, 2, 2, 5, 1, 3, 4}, {2, 4});
  Tensor h = idx;
  for (const auto& layer : layers) h = layer->forward(h);
  test::require_equal(h, gpt(idx));

  // Every parameter of the model belongs to exactly one layer, except the tied embedding, which the
  // head holds too (under its own name).
  std::map<const TensorImpl*, int> owners;
  for (const auto& layer : layers)
    for (const Tensor& p : layer->parameters()) owners[&p.impl()]++;
  REQUIRE(owners.size() == gpt.parameters().size());
  for (const Tensor& p : gpt.parameters()) REQUIRE(owners[&p.impl()] == (p.same_as(gpt.embed->wte->weight) ? 2 : 1));
  REQUIRE(names_of(gpt.head->named_parameters()) == std::vector<std::string>{"wte", "ln_f.weight", "ln_f.bias"});
}

TEST_CASE("GPT::layers(half_block): each block as its attention half and its MLP half", "[nn]") {
  // f32: the halves run the residual add and ln2 as two ops where the block fuses them; the test
  // holds their forward to the same bits, and gradients to an f64 run of the whole GPT.
  nn::GPT gpt(tiny_config(DType::f32));
  auto halves = gpt.layers(nn::LayerGrain::half_block);
  REQUIRE(halves.size() == 2 + 2 * 2);
  REQUIRE(halves.front() == gpt.embed);
  REQUIRE(halves.back() == gpt.head);
  REQUIRE(halves[1]->name() == "BlockAttention");
  REQUIRE(halves[2]->name() == "BlockMLP");
  // They hold the block's own parameters: the same tensors, together all of them, once each.
  const auto block0 = (*gpt.blocks)[0];
  std::vector<Tensor> both = halves[1]->parameters();
  for (const Tensor& p : halves[2]->parameters()) both.push_back(p);
  const std::vector<Tensor> whole = block0->parameters();
  REQUIRE(both.size() == whole.size());
  for (const Tensor& p : whole)
    REQUIRE(std::count_if(both.begin(), both.end(), [&](const Tensor& q) { return q.same_as(p); }) == 1);

  Tensor idx = ids({0, 6, 2, 2, 5, 1, 3, 4}, {2, 4});
  Tensor targets = ids({6, 2, 2, 5, 1, 3, 4, 0}, {2, 4});
  auto gradients = [&](nn::GPT& model, const std::vector<std::shared_ptr<nn::Module>>& layers) {
    model.zero_grad();
    Tape tape;
    Tensor loss;
    {
      TapeGuard guard(tape);
      Tensor h = idx;
      for (const auto& layer : layers) h = (*layer)(h);
      loss = nn::language_model_loss(h, targets);
    }
    tape.backward({loss});
    std::vector<std::vector<double>> out;
    for (const Tensor& p : model.parameters()) out.push_back(p.grad().to_vector());
    return std::make_pair(loss.item(), out);
  };
  const auto [whole_loss, whole_grads] = gradients(gpt, gpt.layers());
  const auto [halves_loss, halves_grads] = gradients(gpt, halves);
  REQUIRE(halves_loss == whole_loss);  // the forward: the same bits

  nn::GPT exact(tiny_config(DType::f64));
  const auto [exact_loss, exact_grads] = gradients(exact, exact.layers());
  REQUIRE(halves_grads.size() == exact_grads.size());
  for (size_t i = 0; i < exact_grads.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(halves_grads[i].size() == exact_grads[i].size());
    for (size_t j = 0; j < exact_grads[i].size(); ++j)
      REQUIRE(halves_grads[i][j] == Approx(exact_grads[i][j]).margin(1e-5).epsilon(1e-4));
  }
}

TEST_CASE("GPT ties the lm head to the token embedding: one tensor, gradient from both uses", "[nn]") {
  nn::GPT gpt(tiny_config());
  Tensor wte = gpt.embed->wte->weight;
  REQUIRE(gpt.head->wte.same_as(wte));
  REQUIRE(gpt.head->wte.storage().same_as(wte.storage()));

  Tensor idx = ids({1, 2, 1, 3}, {1, 4});  // tokens 0, 4, 5, 6 never appear in the input
  Tensor targets = ids({2, 1, 3, 2}, {1, 4});
  auto grad_of_wte = [&](auto forward) {
    wte.zero_grad();
    Tape tape;
    Tensor loss;
    {
      TapeGuard guard(tape);
      loss = forward();
    }
    tape.backward(loss);
    return wte.grad().to_vector();
  };
  std::vector<double> full = grad_of_wte([&] { return gpt.loss(idx, targets); });

  // Only the head's use: cut the embedding path by detaching the embedding output.
  std::vector<double> head_only = grad_of_wte([&] {
    Tensor logits = gpt.head->forward(gpt.blocks->forward(gpt.embed->forward(idx).detach()));
    return cross_entropy(logits.reshape({4, 7}), targets.reshape({4}), -1);
  });
  // Only the embedding's use: let the head score against a detached copy of the same values.
  std::vector<double> embed_only = grad_of_wte([&] {
    Tensor saved = gpt.head->wte;
    gpt.head->wte = wte.detach();
    Tensor loss = gpt.loss(idx, targets);
    gpt.head->wte = saved;
    return loss;
  });
  REQUIRE(gpt.head->wte.same_as(wte));

  for (size_t i = 0; i < full.size(); ++i) REQUIRE(std::abs(full[i] - (head_only[i] + embed_only[i])) < 1e-12);
  // The embedding contributes to the rows of tokens in the input only; the head to every row.
  for (int64_t token = 0; token < 7; ++token) {
    bool in_input = token == 1 || token == 2 || token == 3;
    double embed_norm = 0, head_norm = 0;
    for (int64_t d = 0; d < 8; ++d) {
      embed_norm += std::abs(embed_only[size_t(token * 8 + d)]);
      head_norm += std::abs(head_only[size_t(token * 8 + d)]);
    }
    REQUIRE((embed_norm > 0) == in_input);
    REQUIRE(head_norm > 0);
  }
}

TEST_CASE("tiny GPT passes gradcheck on sampled parameters", "[nn]") {
  nn::GPT gpt(nn::GPTConfig{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 2, .n_embd = 4,
                            .dtype = DType::f64, .seed = 7});
  // Larger weights than GPT-2's 0.02 so every path contributes visibly to the gradient.
  uint64_t seed = 60;
  for (const Tensor& p : gpt.parameters()) ops::copy_(p, test::random(p.shape(), seed++, DType::f64, 0.5));
  Tensor idx = ids({0, 3, 3, 1, 4, 2}, {2, 3});
  Tensor targets = ids({3, -1, 1, 4, 2, 0}, {2, 3});
  std::vector<Tensor> sampled = {gpt.embed->wte->weight, gpt.embed->wpe->weight, gpt.blocks->named_parameters()[2].second,
                                 gpt.head->ln_f->weight};
  REQUIRE(gpt.blocks->named_parameters()[2].first == "0.attn.qkv.weight");
  auto logits = gradcheck([&](const std::vector<Tensor>&) { return gpt(idx); }, sampled);
  INFO(logits.message);
  REQUIRE(logits.ok);
  auto loss = gradcheck([&](const std::vector<Tensor>&) { return gpt.loss(idx, targets); }, sampled);
  INFO(loss.message);
  REQUIRE(loss.ok);
}

TEST_CASE("GPT dropout follows train/eval", "[nn]") {
  nn::GPTConfig c = tiny_config();
  c.dropout = 0.3;
  nn::GPT gpt(c);
  Tensor idx = ids({0, 6, 2, 2, 5, 1}, {1, 6});
  manual_seed(5);
  std::vector<double> t1 = gpt(idx).to_vector(), t2 = gpt(idx).to_vector();
  REQUIRE(t1 != t2);  // a new mask each step
  manual_seed(5);
  REQUIRE(gpt(idx).to_vector() == t1);  // reproducible from the seed
  gpt.eval();
  std::vector<double> e1 = gpt(idx).to_vector();
  REQUIRE(gpt(idx).to_vector() == e1);
  // eval output equals the same model built without dropout
  nn::GPT plain(tiny_config());
  REQUIRE(plain(idx).to_vector() == e1);
}

TEST_CASE("GPT::generate appends greedy predictions", "[nn]") {
  nn::GPT gpt(tiny_config());
  Tensor idx = ids({1, 2, 3}, {1, 3});
  Tensor out = gpt.generate(idx, 5);  // runs past block_size 6: the context is cropped
  REQUIRE(out.shape() == Shape{1, 8});
  REQUIRE(out.dtype() == DType::i64);
  std::vector<double> v = out.to_vector();
  REQUIRE(std::vector<double>(v.begin(), v.begin() + 3) == std::vector<double>{1, 2, 3});
  // The first new token is the argmax of the last position's logits.
  std::vector<double> logits = gpt(idx).to_vector();
  size_t best = 0;
  for (size_t c = 1; c < 7; ++c)
    if (logits[2 * 7 + c] > logits[2 * 7 + best]) best = c;
  REQUIRE(v[3] == double(best));
  for (double t : v) REQUIRE((t >= 0 && t < 7));
}

TEST_CASE("GPT::forward_cached: prefill and steps through a KV cache equal forward on the whole sequence", "[nn]") {
  for (bool fused : {true, false}) {
    INFO((fused ? "fused" : "composed") << " attention");
    nn::GPTConfig c = tiny_config(DType::f32);
    c.vocab_size = 11;
    c.block_size = 10;
    c.fused_attention = fused;
    nn::GPT gpt(c);
    const std::vector<double> tokens = {1, 5, 2, 9, 0, 3, 3, 7, 10, 4, 6, 2, 8, 1, 0, 5, 9, 9, 2, 4};  // 2 rows of 10
    const Tensor whole = gpt(ids(tokens, {2, 10}));                                                  // [2, 10, 11]
    nn::KVCache cache(c.n_layer, c.block_size);
    std::vector<Tensor> pieces;
    for (auto [first, last] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 5}, {5, 9}, {9, 10}}) {
      std::vector<double> part;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = first; t < last; ++t) part.push_back(tokens[size_t(b * 10 + t)]);
      pieces.push_back(gpt.forward_cached(ids(part, {2, last - first}), cache));
      REQUIRE(cache.length == last);
    }
    test::require_close(concat(pieces, 1), whole.to_vector(), 1e-5, 1e-5);
    REQUIRE_THROWS_WITH(gpt.forward_cached(ids({1, 2}, {2, 1}), cache),
                        Contains("GPT: sequence length 1 after 10 cached positions exceeds block_size 10"));
  }
}

TEST_CASE("GPT::generate: greedy with the KV cache equals greedy without it, token for token", "[nn]") {
  for (DType dtype : {DType::f64, DType::f32}) {
    nn::GPTConfig c = tiny_config(dtype);
    c.vocab_size = 13;
    c.block_size = 8;
    c.n_layer = 3;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      c.seed = seed;
      nn::GPT gpt(c);
      const Tensor prompt = ids({1, 2, 3, 4, 12, 0, 5, 7}, {2, 4});
      nn::GenerateOptions cached, uncached;
      uncached.kv_cache = false;
      // 14 new tokens: the cache serves the first 4 + 4 positions, then the window slides.
      const std::vector<double> a = gpt.generate(prompt, 14, cached).to_vector();
      const std::vector<double> b = gpt.generate(prompt, 14, uncached).to_vector();
      INFO(dtype_name(dtype) << " seed " << seed);
      REQUIRE(a == b);
    }
  }
}

TEST_CASE("GPT::generate: sampling is seeded, top-k keeps to the k most likely, vocab_limit is respected", "[nn]") {
  nn::GPTConfig c = tiny_config();
  c.vocab_size = 20;
  c.block_size = 12;
  nn::GPT gpt(c);
  const Tensor prompt = ids({3, 1, 4}, {1, 3});
  nn::GenerateOptions o;
  o.temperature = 1.0;
  o.seed = 5;
  const std::vector<double> a = gpt.generate(prompt, 9, o).to_vector();
  REQUIRE(gpt.generate(prompt, 9, o).to_vector() == a);  // the same seed, the same tokens
  o.seed = 6;
  REQUIRE(gpt.generate(prompt, 9, o).to_vector() != a);
  // top_k = 1 is greedy.
  o.top_k = 1;
  REQUIRE(gpt.generate(prompt, 9, o).to_vector() == gpt.generate(prompt, 9).to_vector());
  // top_k = 3: each sampled token is among the 3 largest logits of its position (checked by a forward
  // pass over the generated sequence), and over many seeds more than one of them is drawn.
  o.top_k = 3;
  std::set<double> drawn_first;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    o.seed = seed;
    const std::vector<double> out = gpt.generate(prompt, 4, o).to_vector();
    const std::vector<double> logits = gpt(ids(out, {1, 7})).to_vector();
    for (int64_t t = 3; t < 7; ++t) {
      const double* row = logits.data() + (t - 1) * 20;
      int64_t larger = 0;
      for (int64_t j = 0; j < 20; ++j) larger += row[j] > row[int64_t(out[size_t(t)])];
      REQUIRE(larger < 3);
    }
    drawn_first.insert(out[3]);
  }
  REQUIRE(drawn_first.size() > 1);
  // vocab_limit: a hot temperature makes every token likely, yet none at or past the limit appears.
  nn::GenerateOptions limited;
  limited.temperature = 50;
  limited.vocab_limit = 6;
  for (double t : gpt.generate(prompt, 30, limited).to_vector()) REQUIRE(t < 6);
  // Greedy too: the argmax over the allowed ids only, checked against the logits.
  nn::GenerateOptions greedy_limited;
  greedy_limited.vocab_limit = 4;
  const std::vector<double> g = gpt.generate(prompt, 1, greedy_limited).to_vector();
  const std::vector<double> last = gpt(prompt).to_vector();
  const double* row = last.data() + 2 * 20;
  REQUIRE(g[3] == double(std::max_element(row, row + 4) - row));
  REQUIRE_THROWS_WITH(gpt.generate(prompt, 2, nn::GenerateOptions{.temperature = -1}), Contains("temperature"));
  REQUIRE_THROWS_WITH(gpt.generate(ids({}, {1, 0}), 2), Contains("T >= 1"));
}

// ---------------------------------------------------------------------------------------------------
// State dicts and conversion

TEST_CASE("state_dict / load_state_dict round trip copies values in place", "[nn]") {
  nn::GPT a(tiny_config());
  nn::GPTConfig other = tiny_config();
  other.seed = 99;
  nn::GPT b(other);
  Tensor idx = ids({0, 6, 2, 2, 5, 1}, {2, 3});
  REQUIRE(a(idx).to_vector() != b(idx).to_vector());

  Tensor b_wte = b.embed->wte->weight;
  b.load_state_dict(a.state_dict());
  test::require_equal(b(idx), a(idx));
  REQUIRE(b.embed->wte->weight.same_as(b_wte));  // same tensors, new values
  REQUIRE(b.head->wte.same_as(b_wte));           // the tie survives
  REQUIRE_FALSE(b_wte.storage().same_as(a.embed->wte->weight.storage()));
  ops::fill_(a.embed->wte->weight, 0.0);  // b holds copies, not a's bytes
  REQUIRE(b_wte.to_vector() != a.embed->wte->weight.to_vector());

  // Loading a module's own state is a no-op.
  std::vector<double> before = b(idx).to_vector();
  b.load_state_dict(b.state_dict());
  REQUIRE(b(idx).to_vector() == before);
}

TEST_CASE("load_state_dict names missing, unexpected and mismatched keys", "[nn]") {
  nn::GPT gpt(tiny_config());
  nn::StateDict good;
  for (const auto& [k, t] : gpt.state_dict()) good[k] = ops::clone(t);
  std::vector<double> wte_before = gpt.embed->wte->weight.to_vector();

  nn::StateDict missing = good;
  missing.erase("embed.wpe.weight");
  missing.erase("head.ln_f.bias");
  REQUIRE_THROWS_WITH(gpt.load_state_dict(missing),
                      Contains("load_state_dict (GPT): missing keys 'embed.wpe.weight', 'head.ln_f.bias'"));

  nn::StateDict extra = good;
  extra["blocks.9.ln1.weight"] = zeros({8}, DType::f64);
  REQUIRE_THROWS_WITH(gpt.load_state_dict(extra), Contains("unexpected keys 'blocks.9.ln1.weight'"));

  nn::StateDict both = missing;
  both["lm_head.weight"] = zeros({7, 8}, DType::f64);
  REQUIRE_THROWS_WITH(gpt.load_state_dict(both), Contains("missing keys 'embed.wpe.weight', 'head.ln_f.bias'; "
                                                           "unexpected keys 'lm_head.weight'"));

  nn::StateDict wrong_shape = good;
  wrong_shape["blocks.1.attn.qkv.weight"] = zeros({8, 24}, DType::f64);
  REQUIRE_THROWS_WITH(gpt.load_state_dict(wrong_shape),
                      Contains("'blocks.1.attn.qkv.weight' has shape [24, 8] in the module but [8, 24] in the state dict"));

  nn::StateDict wrong_dtype = good;
  wrong_dtype["embed.wte.weight"] = zeros({7, 8}, DType::f32);
  REQUIRE_THROWS_WITH(gpt.load_state_dict(wrong_dtype),
                      Contains("'embed.wte.weight' has dtype f64 in the module but f32 in the state dict"));

  // A failed load changes nothing, even for keys checked before the bad one.
  nn::StateDict late_error = good;
  late_error["embed.wte.weight"] = zeros({7, 8}, DType::f64);
  late_error["head.ln_f.weight"] = zeros({3}, DType::f64);
  REQUIRE_THROWS_AS(gpt.load_state_dict(late_error), Error);
  REQUIRE(gpt.embed->wte->weight.to_vector() == wte_before);

  // Non-strict: unknown and missing keys are skipped, the rest is loaded (and still shape-checked).
  nn::StateDict partial;
  partial["embed.wte.weight"] = zeros({7, 8}, DType::f64);
  partial["something.else"] = ones({1});
  gpt.load_state_dict(partial, /*strict=*/false);
  REQUIRE(gpt.embed->wte->weight.to_vector() == std::vector<double>(56, 0.0));
  REQUIRE_THROWS_WITH(gpt.load_state_dict(wrong_shape, false), Contains("has shape [24, 8] in the module"));
}

TEST_CASE("Module::to converts parameters in place, keeping handles and ties", "[nn]") {
  nn::GPT gpt(tiny_config(DType::f32));
  Tensor idx = ids({0, 6, 2, 2, 5, 1}, {2, 3});
  std::vector<double> before = gpt(idx).to_vector();
  Tensor wte = gpt.embed->wte->weight;
  gpt.to(DType::f64);
  REQUIRE(wte.dtype() == DType::f64);
  REQUIRE(gpt.head->wte.same_as(wte));
  REQUIRE(gpt.head->wte.dtype() == DType::f64);
  for (const Tensor& p : gpt.parameters()) {
    REQUIRE(p.dtype() == DType::f64);
    REQUIRE(p.requires_grad());
  }
  Tensor after = gpt(idx);
  REQUIRE(after.dtype() == DType::f64);
  test::require_close(after, before, 1e-4, 1e-3);

  Toy toy(nn::Init{});
  toy.to(DType::f64);
  REQUIRE(toy.count.dtype() == DType::i64);  // integer buffers keep their dtype
  REQUIRE_THROWS_WITH(toy.to(DType::i32), Contains("Module::to: target dtype must be floating-point, got i32"));
}

// ---------------------------------------------------------------------------------------------------
// Convolutional layers

TEST_CASE("Conv2d matches direct f64 loops (stride 2, padding 1)", "[nn]") {
  Generator gen(51);
  nn::Conv2d conv(2, 3, 3, {.stride = 2, .padding = 1, .init = {.dtype = DType::f64, .generator = &gen}});
  REQUIRE(conv.weight.shape() == Shape{3, 2, 3, 3});
  ops::copy_(conv.bias, test::random({3}, 52));
  const int64_t N = 2, C = 2, H = 5, W = 4, O = 3, K = 3, S = 2, P = 1, OH = 3, OW = 2;
  Tensor x = test::random({N, C, H, W}, 53);
  std::vector<double> xv = x.to_vector(), wv = conv.weight.to_vector(), bv = conv.bias.to_vector(), ref;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = bv[size_t(o)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < K; ++kh)
              for (int64_t kw = 0; kw < K; ++kw) {
                int64_t ih = oh * S - P + kh, iw = ow * S - P + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += xv[size_t(((n * C + c) * H + ih) * W + iw)] * wv[size_t(((o * C + c) * K + kh) * K + kw)];
              }
          ref.push_back(s);
        }
  Tensor y = conv(x);
  REQUIRE(y.shape() == Shape{N, O, OH, OW});
  test::require_close(y, ref, 1e-12, 1e-12);
  double bound = 1.0 / std::sqrt(2.0 * 9.0);
  for (double v : wv) REQUIRE(std::abs(v) < bound);
  REQUIRE_THROWS_WITH(conv(zeros({2, 3, 5, 5}, DType::f64)), Contains("Conv2d: expected input [N, 2, H, W], got [2, 3, 5, 5]"));
}

TEST_CASE("pooling and Flatten layers", "[nn]") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4}, DType::f64);
  test::require_close(nn::MaxPool2d(2)(x), {6, 8, 14, 16});
  test::require_close(nn::AvgPool2d(2)(x), {3.5, 5.5, 11.5, 13.5});
  REQUIRE(nn::MaxPool2d(3, {.stride = 1})(x).shape() == Shape{1, 1, 2, 2});
  REQUIRE(nn::MaxPool2d(2).stride == 2);

  Tensor t = test::random({2, 3, 4, 5}, 54);
  REQUIRE(nn::Flatten()(t).shape() == Shape{2, 60});
  REQUIRE(nn::Flatten(0)(t).shape() == Shape{120});
  REQUIRE(nn::Flatten(1, 2)(t).shape() == Shape{2, 12, 5});
  REQUIRE(nn::Flatten()(t).to_vector() == t.to_vector());
  REQUIRE(nn::Flatten()(test::transposed(t)).to_vector() == t.to_vector());
  REQUIRE_THROWS_WITH(nn::Flatten(2, 1)(t), Contains("Flatten: start_dim 2 comes after end_dim 1"));
  REQUIRE_THROWS_WITH(nn::MaxPool2d(0), Contains("MaxPool2d: invalid kernel=0"));
}

TEST_CASE("a small CNN runs forward and backward with the right shapes", "[nn]") {
  Generator gen(55);
  nn::Init init{.dtype = DType::f64, .generator = &gen};
  nn::Sequential cnn{std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = 1, .init = init}),  // [N, 4, 8, 8]
                     std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::MaxPool2d>(2),                        // [N, 4, 4, 4]
                     std::make_shared<nn::Conv2d>(4, 8, 3, nn::Conv2dOptions{.stride = 2, .padding = 1, .init = init}),  // [N, 8, 2, 2]
                     std::make_shared<nn::SiLU>(),
                     std::make_shared<nn::AvgPool2d>(2),                        // [N, 8, 1, 1]
                     std::make_shared<nn::Flatten>(),                           // [N, 8]
                     std::make_shared<nn::Linear>(8, 10, nn::LinearOptions{.init = init})};
  REQUIRE(cnn.parameter_count() == (4 * 9 + 4) + (8 * 4 * 9 + 8) + (10 * 8 + 10));
  Tensor x = test::leaf(test::random({3, 1, 8, 8}, 56));
  Tensor targets = ids({1, 9, 0}, {3});
  Tape tape;
  Tensor logits, loss;
  {
    TapeGuard guard(tape);
    logits = cnn(x);
    loss = cross_entropy(logits, targets);
  }
  REQUIRE(logits.shape() == Shape{3, 10});
  tape.backward(loss);
  REQUIRE(x.grad().shape() == x.shape());
  for (const auto& [name, p] : cnn.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    REQUIRE(p.grad().shape() == p.shape());
    double norm = 0;
    for (double g : p.grad().to_vector()) norm += std::abs(g);
    REQUIRE(norm > 0);
  }
}

TEST_CASE("GPT with bf16 compute: f32 master weights and gradients, close to an f64 reference", "[nn]") {
  nn::GPTConfig c = tiny_config(DType::f32);
  c.compute_dtype = DType::bf16;
  nn::GPT mixed(c);
  // The reference: the same weights (the draws do not depend on the compute dtype) in f64.
  nn::GPT f64(tiny_config(DType::f32));
  for (const auto& [name, t] : mixed.state_dict()) test::require_equal(f64.state_dict().at(name), t);
  f64.to(DType::f64);
  REQUIRE(mixed.compute_dtype() == DType::bf16);
  REQUIRE(mixed.blocks->layers()[0]->compute_dtype() == DType::bf16);  // set on every module

  Tensor idx = ids({0, 6, 2, 2, 5, 1, 3, 4, 4, 0}, {2, 5});
  Tensor targets = ids({6, 2, -1, 5, 1, -1, -1, 4, 0, 3}, {2, 5});
  auto run = [&](nn::GPT& model) {
    Tape tape;
    Tensor logits, loss;
    {
      TapeGuard guard(tape);
      logits = model(idx);
      loss = nn::language_model_loss(logits, targets);
    }
    tape.backward(loss);
    return std::make_pair(logits, loss);
  };
  auto [logits, loss] = run(mixed);
  auto [want_logits, want_loss] = run(f64);
  REQUIRE(logits.dtype() == DType::bf16);  // activations in bf16...
  REQUIRE(loss.dtype() == DType::f32);     // ...the loss taken in f32
  // Normalised errors: bf16 keeps 8 significant bits, so about 2^-8 relative per value.
  auto nmse = [](const Tensor& got, const Tensor& want) {
    const std::vector<double> g = got.to_vector(), w = want.to_vector();
    double err = 0, ref = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      err += (g[i] - w[i]) * (g[i] - w[i]);
      ref += w[i] * w[i];
    }
    return err / ref;
  };
  CHECK(nmse(logits, want_logits) < 1e-4);
  CHECK(std::abs(loss.item() - want_loss.item()) < 1e-2 * want_loss.item());
  std::map<std::string, Tensor> want_grads;
  for (const auto& [name, p] : f64.named_parameters()) want_grads[name] = p.grad();
  double err = 0, ref = 0;  // over every gradient value of the model
  for (const auto& [name, p] : mixed.named_parameters()) {
    INFO(name);
    REQUIRE(p.dtype() == DType::f32);
    REQUIRE(p.grad().dtype() == DType::f32);  // gradients land on the master weights in f32
    const std::vector<double> g = p.grad().to_vector(), w = want_grads.at(name).to_vector();
    for (size_t i = 0; i < g.size(); ++i) {
      err += (g[i] - w[i]) * (g[i] - w[i]);
      ref += w[i] * w[i];
    }
    // Per tensor, looser: ln_f.bias's gradient sums (softmax - one-hot) @ wte over rows, which
    // cancels to a small total, so bf16's rounding of the terms shows as about 1e-2.
    CHECK(nmse(p.grad(), want_grads.at(name)) < 3e-2);
  }
  CHECK(err / ref < 1e-3);
  // f32 compute on f32 weights is the plain model, bitwise.
  nn::GPTConfig plain = tiny_config(DType::f32);
  plain.compute_dtype = DType::f32;
  nn::GPT a(plain), b(tiny_config(DType::f32));
  test::require_equal(a(idx), b(idx));
  REQUIRE_THROWS_WITH(a.set_compute_dtype(DType::i32), Contains("compute dtype must be floating point"));
}

TEST_CASE("set_compute_dtype: a hand-written layer computes in bf16 with no casts of its own", "[nn][autocast]") {
  // A layer that uses its f32 parameter directly, as any user's layer would.
  struct Scale : nn::Module {
    Tensor s;
    Scale() { s = register_parameter("s", full({3}, 1.5)); }
    std::string name() const override { return "Scale"; }
    Tensor forward(const Tensor& x) override { return x * s + s; }
  };
  nn::Sequential model{std::make_shared<Scale>(), std::make_shared<Scale>()};
  model.set_compute_dtype(DType::bf16);
  Tensor x = test::random({2, 3}, 71, DType::bf16);  // bf16 activations, as a Linear before would make
  Tape tape;
  Tensor y;
  Tensor loss = tape.record([&] {
    y = model(x);  // operator(): forward under Autocast(bf16)
    return sum(to_dtype(y, DType::f32));
  });
  REQUIRE(y.dtype() == DType::bf16);
  REQUIRE(!autocast_dtype());  // only for the call
  tape.backward(loss);
  // The reference, conversions written out: ((x s + s) s + s) in bf16.
  const Tensor s16 = full({3}, 1.5, DType::bf16);
  test::require_equal(y, (x * s16 + s16) * s16 + s16);
  for (const Tensor& p : model.parameters()) REQUIRE(p.grad().dtype() == DType::f32);
  // forward() itself opens no scope: the module's caller does (operator(), and Sequential and the
  // pipeline, which call their layers through it). Without one, bf16 meets f32 and the op says so.
  REQUIRE_THROWS_WITH(model.layers()[0]->forward(x), Contains("bf16") && Contains("f32"));
  REQUIRE(model.forward(x).dtype() == DType::bf16);
}
