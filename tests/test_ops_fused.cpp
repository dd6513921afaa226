// Tests for the fused ops: a linear layer's bias + GELU in the GEMM's epilogue (ops::linear,
// brigade::linear with an Activation) and the residual add fused with the layer_norm after it
// (ops::add_layer_norm, brigade::add_layer_norm).
//
// A fusion promises two things, and each is checked against something it does not use:
//   - the same bits as the separate ops (matmul, add, gelu; add, layer_norm), forward and backward —
//     so turning the fusion on changes speed only;
//   - the right values: against f64 loops written here, and gradients against finite differences.
#include <cmath>
#include <functional>

#include "core/parallel.h"
#include "nn/mlp.h"
#include "nn/norm.h"
#include "test_util.h"

using namespace brigade;
using test::leaf;
using test::random;
using test::require_close;
using test::require_equal;
using test::require_gradcheck;

namespace {

Tensor transposed_weight(const Tensor& w) { return w.transpose(0, 1); }

// The separate ops a fused linear replaces: matmul, then add, then gelu (each its own pass).
ops::LinearOutput linear_apart(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  Tensor pre = ops::matmul(x, transposed_weight(w));
  if (b.defined()) pre = ops::binary(ops::BinaryOp::add, pre, b);
  return {act == Activation::gelu ? ops::unary(ops::UnaryOp::gelu, pre) : pre, pre};
}

double gelu_f64(double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

// act(x @ w^T + b) in f64 loops over [rows, in] x and [out, in] w.
std::vector<double> ref_linear(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  const int64_t in = w.size(1), out = w.size(0), rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const std::vector<double> xv = ops::contiguous(x).to_vector(), wv = w.to_vector();
  const std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>(size_t(out), 0.0);
  std::vector<double> y;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bv[size_t(o)];
      for (int64_t p = 0; p < in; ++p) s += xv[size_t(r * in + p)] * wv[size_t(o * in + p)];
      y.push_back(act == Activation::gelu ? gelu_f64(s) : s);
    }
  return y;
}

// Gradients of every defined leaf in `inputs` (undefined: none) after one backward of f's outputs
// with random upstream gradients (the same for the same seed).
std::vector<Tensor> grads_of(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& f,
                             const std::vector<Tensor>& inputs, uint64_t seed) {
  for (Tensor x : inputs)
    if (x.defined()) x.zero_grad();
  Tape tape;
  std::vector<Tensor> outs;
  {
    TapeGuard guard(tape);
    outs = f(inputs);
  }
  std::vector<Tensor> upstream;
  for (size_t i = 0; i < outs.size(); ++i) upstream.push_back(random(outs[i].shape(), seed + i, outs[i].dtype()));
  tape.backward(outs, upstream);
  std::vector<Tensor> grads;
  for (const Tensor& x : inputs) grads.push_back(x.defined() ? x.grad() : Tensor());
  return grads;
}

}  // namespace

// =====================================================================================================
// linear: bias + GELU in the GEMM's epilogue
// =====================================================================================================

TEST_CASE("linear epilogue: the bits of matmul, add and gelu apart, and f64 loops' values", "[fused][linear]") {
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const Activation act = GENERATE(Activation::none, Activation::gelu);
  struct Case {
    Shape x;
    int64_t out;
    bool bias, transposed_x;
  };
  // Rows and columns past the CPU GEMM's tiles (6-row register blocks, 256-column tiles), a K of 0
  // (the product is 0, the epilogue still runs), 3-D inputs, a transposed input read through strides.
  const Case c = GENERATE(Case{{1, 1}, 1, true, false}, Case{{7, 33}, 17, true, false},
                          Case{{2, 150, 65}, 300, true, false}, Case{{97, 40}, 513, false, false},
                          Case{{20, 600}, 70, true, false},  // K past one 256-deep block: the epilogue after the last

                          Case{{31, 9}, 12, true, true}, Case{{5, 0}, 6, true, false});
  CAPTURE(dtype_name(dtype), int(act), shape_str(c.x), c.out, c.bias, c.transposed_x);
  const int64_t in = c.x.back();
  Tensor x = random(c.x, 1, dtype, 2.0);
  if (c.transposed_x) x = test::transposed(x);
  const Tensor w = random({c.out, in}, 2, dtype, 0.5), b = c.bias ? random({c.out}, 3, dtype) : Tensor();

  const ops::LinearOutput fused = ops::linear(x, w, b, act, true);
  const ops::LinearOutput apart = linear_apart(x, w, b, act);
  require_equal(fused.y, apart.y);
  require_equal(fused.pre, apart.pre);
  Shape y_shape = c.x;
  y_shape.back() = c.out;
  REQUIRE(fused.y.shape() == y_shape);
  const double tol = dtype == DType::f32 ? 2e-5 : 1e-12;
  require_close(fused.y, ref_linear(x, w, b, act), tol, tol);
  REQUIRE_FALSE(ops::linear(x, w, b, act, false).pre.defined());
}

TEST_CASE("linear epilogue: results do not depend on the thread count", "[fused][linear]") {
  const Tensor x = random({301, 70}, 4, DType::f32), w = random({520, 70}, 5, DType::f32), b = random({520}, 6, DType::f32);
  const int threads = num_threads();
  set_num_threads(1);
  const ops::LinearOutput one = ops::linear(x, w, b, Activation::gelu, true);
  set_num_threads(threads);
  const ops::LinearOutput many = ops::linear(x, w, b, Activation::gelu, true);
  require_equal(one.y, many.y);
  require_equal(one.pre, many.pre);
}

TEST_CASE("linear epilogue: bf16 and f16 on the CPU round where the separate ops do", "[fused][linear]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  const Tensor x = random({9, 24}, 7, dtype), w = random({13, 24}, 8, dtype), b = random({13}, 9, dtype);
  const ops::LinearOutput fused = ops::linear(x, w, b, Activation::gelu, true);
  const ops::LinearOutput apart = linear_apart(x, w, b, Activation::gelu);
  REQUIRE(fused.y.dtype() == dtype);
  require_equal(fused.y, apart.y);
  require_equal(fused.pre, apart.pre);
}

TEST_CASE("linear with gelu: gradients, the split backward, and the bits of linear then gelu", "[fused][linear][grad]") {
  SECTION("gradcheck: x, weight, bias") {
    require_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2], Activation::gelu); },
                      {leaf(random({2, 3, 5}, 11)), leaf(random({4, 5}, 12)), leaf(random({4}, 13))});
  }
  SECTION("gradcheck: an input of width 0 (the product is 0; bias and weight still get gradients)") {
    require_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2], Activation::gelu); },
                      {leaf(random({3, 0}, 10)), leaf(random({4, 0}, 12)), leaf(random({4}, 13))});
  }
  SECTION("gradcheck: no bias, transposed x") {
    require_gradcheck(
        [](const std::vector<Tensor>& in) { return linear(in[0].transpose(0, 1), in[1], Tensor(), Activation::gelu); },
        {leaf(random({5, 3}, 14)), leaf(random({2, 5}, 15))});
  }
  SECTION("gradients equal those of linear followed by gelu, bit for bit") {
    const DType dtype = GENERATE(DType::f32, DType::f64);
    const std::vector<Tensor> in = {leaf(random({6, 7, 19}, 16, dtype)), leaf(random({23, 19}, 17, dtype)),
                                    leaf(random({23}, 18, dtype))};
    const auto fused = grads_of([](const std::vector<Tensor>& v) {
      return std::vector<Tensor>{linear(v[0], v[1], v[2], Activation::gelu)};
    }, in, 19);
    const auto apart = grads_of([](const std::vector<Tensor>& v) {
      return std::vector<Tensor>{gelu(add(matmul(v[0], v[1].transpose(0, 1)), v[2]))};
    }, in, 19);
    for (size_t i = 0; i < in.size(); ++i) require_equal(fused[i], apart[i]);
  }
  SECTION("backward_input then backward_weight equals one backward") {
    const Tensor x = leaf(random({4, 6}, 20)), w = leaf(random({5, 6}, 21)), b = leaf(random({5}, 22));
    const Tensor g = random({4, 5}, 23);
    auto run = [&](bool split) {
      for (Tensor t : {x, w, b}) t.zero_grad();
      Tape tape;
      Tensor y;
      {
        TapeGuard guard(tape);
        y = linear(x, w, b, Activation::gelu);
      }
      if (split) {
        tape.backward_input({y}, {g}, {x});
        REQUIRE_FALSE(w.grad().defined());
        tape.backward_weight();
      } else {
        tape.backward({y}, {g});
      }
      return std::vector<std::vector<double>>{x.grad().to_vector(), w.grad().to_vector(), b.grad().to_vector()};
    };
    REQUIRE(run(true) == run(false));
  }
}

TEST_CASE("linear with gelu is, on the tape, the two nodes of linear then gelu", "[fused][linear][grad]") {
  // So a zero-bubble schedule frees the GELU's saved input after the input-gradient phase, as it
  // would for the separate ops: only the linear node waits for the weight phase.
  const Tensor x = leaf(random({4, 6}, 50)), w = leaf(random({5, 6}, 51)), b = leaf(random({5}, 52));
  Tape tape;
  {
    TapeGuard guard(tape);
    linear(x, w, b, Activation::gelu);
  }
  REQUIRE(tape.size() == 2);
  CHECK(tape.nodes()[0].name == std::string("linear"));
  CHECK(tape.nodes()[1].name == std::string("gelu"));
  CHECK(tape.nodes()[1].inputs.size() == 1);
}

TEST_CASE("fused layers keep a module's own compute dtype and autocast's dtype rules", "[fused][grad]") {
  SECTION("Linear::forward(x, gelu) and LayerNorm::forward_add run in their module's compute dtype") {
    nn::MLP mlp(8, {.hidden = 16});
    mlp.fc->set_compute_dtype(DType::bf16);  // the fc alone, as operator() would honour it
    const Tensor x = random({3, 8}, 53, DType::f32), r = random({3, 8}, 58, DType::f32);
    const Tensor fused = mlp.fc->forward(x, Activation::gelu);
    CHECK(fused.dtype() == DType::bf16);
    require_equal(fused, (*mlp.act)((*mlp.fc)(x)));
    nn::LayerNorm ln(8);
    ln.set_compute_dtype(DType::bf16);
    const auto [h, y] = ln.forward_add(x, r);
    require_equal(h, add(x, r));
    require_equal(y, ln(add(x, r)));
    CHECK(y.dtype() == DType::bf16);
  }
  SECTION("add_layer_norm under autocast with two f32 operands: an f32 sum, a bf16 norm, as apart") {
    const Tensor x = random({3, 8}, 54, DType::f32), r = random({3, 8}, 55, DType::f32);
    const Tensor w = random({8}, 56, DType::f32), b = random({8}, 57, DType::f32);
    Autocast scope(DType::bf16);
    const auto [h, y] = add_layer_norm(x, r, w, b);
    const Tensor h_apart = add(x, r);
    require_equal(h, h_apart);
    require_equal(y, layer_norm(h_apart, w, b));
    CHECK(h.dtype() == DType::f32);
    CHECK(y.dtype() == DType::bf16);
  }
}

TEST_CASE("linear epilogue: bad inputs name the shapes", "[fused][linear][errors]") {
  const Tensor x = random({2, 3, 4}, 24), w = random({5, 4}, 25);
  REQUIRE_THROWS_WITH(ops::linear(x, random({5, 3}, 26), Tensor(), Activation::gelu, false),
                      Catch::Contains("linear: input shape [2, 3, 4] does not end in weight's in_features (weight "
                                      "shape [5, 3])"));
  REQUIRE_THROWS_WITH(ops::linear(x, w, random({4}, 27), Activation::gelu, false),
                      Catch::Contains("linear: bias shape [4] should be [5]"));
  REQUIRE_THROWS_WITH(ops::linear(x, random({5, 4}, 28, DType::f32), Tensor(), Activation::none, false),
                      Catch::Contains("linear") && Catch::Contains("f64") && Catch::Contains("f32"));
}

// =====================================================================================================
// add_layer_norm: the residual add and the norm after it
// =====================================================================================================

TEST_CASE("add_layer_norm: the bits of add then layer_norm, forward and backward", "[fused][norm]") {
  const DType dtype = GENERATE(DType::f32, DType::f64, DType::bf16);
  const bool affine = GENERATE(true, false);
  const int64_t d = GENERATE(1, 37, 300);
  CAPTURE(dtype_name(dtype), affine, d);
  const std::vector<Tensor> in = {leaf(random({3, 5, d}, 31, dtype, 2.0)), leaf(random({3, 5, d}, 32, dtype)),
                                  affine ? leaf(random({d}, 33, dtype)) : Tensor(),
                                  affine ? leaf(random({d}, 34, dtype)) : Tensor()};
  // Both outputs are used downstream, as in a transformer block (h goes on to the next residual add).
  auto fused = [](const std::vector<Tensor>& v) {
    auto [h, y] = add_layer_norm(v[0], v[1], v[2], v[3]);
    return std::vector<Tensor>{h, y};
  };
  auto apart = [](const std::vector<Tensor>& v) {
    const Tensor h = add(v[0], v[1]);
    return std::vector<Tensor>{h, layer_norm(h, v[2], v[3])};
  };
  const std::vector<Tensor> f = fused(in), a = apart(in);
  require_equal(f[0], a[0]);
  require_equal(f[1], a[1]);
  const auto gf = grads_of(fused, in, 35), ga = grads_of(apart, in, 35);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].defined()) require_equal(gf[i], ga[i]);
}

TEST_CASE("add_layer_norm: values against f64 loops, non-contiguous inputs", "[fused][norm]") {
  const int64_t d = 29;
  const Tensor x = test::transposed(random({8, d}, 36)), r = test::strided(random({8, d}, 37));
  const Tensor w = random({d}, 38), b = random({d}, 39);
  const ops::AddNormOutput out = ops::add_layer_norm(x, r, w, b, 1e-5);
  const std::vector<double> xv = x.to_vector(), rv = r.to_vector(), wv = w.to_vector(), bv = b.to_vector();
  std::vector<double> sum(xv.size()), y;
  for (size_t i = 0; i < xv.size(); ++i) sum[i] = xv[i] + rv[i];
  for (int64_t row = 0; row < 8; ++row) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += sum[size_t(row * d + j)] / double(d);
    for (int64_t j = 0; j < d; ++j) var += std::pow(sum[size_t(row * d + j)] - mean, 2) / double(d);
    for (int64_t j = 0; j < d; ++j)
      y.push_back((sum[size_t(row * d + j)] - mean) / std::sqrt(var + 1e-5) * wv[size_t(j)] + bv[size_t(j)]);
  }
  require_close(out.sum, sum, 1e-15, 1e-15);
  require_close(out.norm.y, y, 1e-12, 1e-12);
}

TEST_CASE("add_layer_norm: gradients by finite differences", "[fused][norm][grad]") {
  // Weights on the two outputs make a scalar that depends on both, so the sum's own gradient counts.
  const Tensor ws = random({3, 6}, 40), wy = random({3, 6}, 41);
  require_gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto [h, y] = add_layer_norm(in[0], in[1], in[2], in[3]);
        return add(mul(h, ws), mul(y, wy));
      },
      {leaf(random({3, 6}, 42)), leaf(random({3, 6}, 43)), leaf(random({6}, 44)), leaf(random({6}, 45))});
}

TEST_CASE("add_layer_norm: bad inputs name the shapes and dtypes", "[fused][norm][errors]") {
  REQUIRE_THROWS_WITH(ops::add_layer_norm(zeros({2, 3}), zeros({3, 2}), Tensor(), Tensor(), 1e-5),
                      Catch::Contains("add_layer_norm: residual shape [3, 2] differs from input shape [2, 3]"));
  REQUIRE_THROWS_WITH(ops::add_layer_norm(zeros({2, 3}), zeros({2, 3}, DType::f64), Tensor(), Tensor(), 1e-5),
                      Catch::Contains("add_layer_norm"));
  REQUIRE_THROWS_WITH(ops::add_layer_norm(zeros({2, 3}), zeros({2, 3}), zeros({4}), Tensor(), 1e-5),
                      Catch::Contains("add_layer_norm: weight has shape [4] but input [2, 3] needs [3]"));
}
