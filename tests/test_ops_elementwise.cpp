// Elementwise ops (binary with broadcasting, scalar variants and operators, unary, pow,
// masked_fill), copies and dtype conversion, and the view methods: forward against f64 loops
// written here, gradients by gradcheck, strided/broadcast inputs, bf16/f16 rounding, bad inputs.
#include "test_util.h"

#include "kernels/cpu/elementwise_avx2.h"

using namespace brigade;
using test::require_gradcheck;
using test::strided_leaf;
using test::round_to;
using test::unravel;
using ops::BinaryOp;
using ops::UnaryOp;

namespace {

// ---- references ----

// Row-major flat index into a tensor of shape `in` of the element that broadcasting pairs with
// output index `idx`: dims align from the right, and size-1 dims repeat.
int64_t broadcast_index(const std::vector<int64_t>& idx, const Shape& in) {
  const size_t lead = idx.size() - in.size();
  int64_t flat = 0;
  for (size_t d = 0; d < in.size(); ++d) flat = flat * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return flat;
}

double ref_binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
  }
  return 0;
}

std::vector<double> ref_broadcast(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out) {
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  std::vector<double> result(size_t(shape_numel(out)));
  for (int64_t i = 0; i < shape_numel(out); ++i) {
    const std::vector<int64_t> idx = unravel(i, out);
    result[size_t(i)] = ref_binary(op, va[size_t(broadcast_index(idx, a.shape()))], vb[size_t(broadcast_index(idx, b.shape()))]);
  }
  return result;
}

double ref_unary(UnaryOp op, double x) {
  const double pi = std::acos(-1.0);
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::rsqrt: return 1 / std::sqrt(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::relu: return x > 0 ? x : 0;
    // 0.5 x (1 + tanh u) written as x / (1 + exp(-2u)), the same in exact arithmetic but without
    // 1 + tanh(u) cancelling to 0 for x below about -9 (where gelu is ~1e-37, not 0).
    case UnaryOp::gelu: return x / (1 + std::exp(-2 * std::sqrt(2 / pi) * (x + 0.044715 * std::pow(x, 3))));
    case UnaryOp::silu: return x / (1 + std::exp(-x));
    case UnaryOp::sigmoid: return 1 / (1 + std::exp(-x));
  }
  return 0;
}

// The same ops computed in f32, operation for operation, as the spec for bf16/f16 inputs.
float ref_unary_f32(UnaryOp op, float x) {
  const float k = 0.7978845608028654f, c = 0.044715f;  // sqrt(2 / pi) and GELU's cubic coefficient
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::rsqrt: return 1.0f / std::sqrt(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::relu: return x > 0 ? x : 0.0f;
    case UnaryOp::gelu: return x / (1.0f + std::exp(-2.0f * (k * (x + c * x * x * x))));  // 0.5 (1 + tanh u) = sigmoid(2u)
    case UnaryOp::silu: return x * (1.0f / (1.0f + std::exp(-x)));
    case UnaryOp::sigmoid: return 1.0f / (1.0f + std::exp(-x));
  }
  return 0;
}

std::vector<double> map_values(const Tensor& x, const std::function<double(double)>& f) {
  std::vector<double> out = x.to_vector();
  for (double& v : out) v = f(v);
  return out;
}

// Inputs inside each unary op's domain: log, sqrt and rsqrt get positive values.
Tensor unary_input(UnaryOp op, const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Tensor x = test::random(shape, seed, DType::f64, 2.0);
  if (op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt) x = ops::unary(UnaryOp::exp, x);
  return ops::to_dtype(x, dtype);
}

Tensor call_unary(UnaryOp op, const Tensor& x) {
  switch (op) {
    case UnaryOp::neg: return neg(x);
    case UnaryOp::exp: return exp(x);
    case UnaryOp::log: return log(x);
    case UnaryOp::sqrt: return sqrt(x);
    case UnaryOp::rsqrt: return rsqrt(x);
    case UnaryOp::tanh: return tanh(x);
    case UnaryOp::relu: return relu(x);
    case UnaryOp::gelu: return gelu(x);
    case UnaryOp::silu: return silu(x);
    case UnaryOp::sigmoid: return sigmoid(x);
  }
  return x;
}

Tensor call_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::add: return add(a, b);
    case BinaryOp::sub: return sub(a, b);
    case BinaryOp::mul: return mul(a, b);
    case BinaryOp::div: return div(a, b);
  }
  return a;
}

// The same values seen through a non-contiguous layout (or as they are).
Tensor relayout(const Tensor& t, int layout) {
  if (layout == 1 && t.dim() > 0 && t.shape().back() > 1) return test::strided(t);
  if (layout == 2 && t.dim() >= 2) return test::transposed(t);
  return t;
}




const std::vector<UnaryOp> kUnaryOps = {UnaryOp::neg,  UnaryOp::exp,  UnaryOp::log,  UnaryOp::sqrt, UnaryOp::rsqrt,
                                        UnaryOp::tanh, UnaryOp::relu, UnaryOp::gelu, UnaryOp::silu, UnaryOp::sigmoid};

}  // namespace

// ================================================================================================
// binary ops
// ================================================================================================

TEST_CASE("binary ops on small tensors, computed by hand", "[binary]") {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}}, DType::f64);
  Tensor row = tensor({10, 20, 30}, DType::f64);
  Tensor col = from_vector(std::vector<double>{2, 4}, {2, 1}, DType::f64);
  test::require_close(a + row, {11, 22, 33, 14, 25, 36});
  test::require_close(row - a, {9, 18, 27, 6, 15, 24});
  test::require_close(a * col, {2, 4, 6, 16, 20, 24});
  test::require_close(a / col, {0.5, 1, 1.5, 1, 1.25, 1.5});
  Tensor outer = col * from_vector(std::vector<double>{1, 2, 3}, {1, 3}, DType::f64);  // [2,1] x [1,3]
  REQUIRE(outer.shape() == Shape{2, 3});
  test::require_close(outer, {2, 4, 6, 4, 8, 12});
  Tensor two = scalar(2.0, DType::f64);
  test::require_close(a * two, {2, 4, 6, 8, 10, 12});
  test::require_close(two - a, {1, 0, -1, -2, -3, -4});
  REQUIRE((two * two).shape() == Shape{});
}

TEST_CASE("binary ops broadcast both ways and match an f64 loop", "[binary]") {
  const BinaryOp op = GENERATE(BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div);
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const int layout = GENERATE(0, 1, 2);
  struct Pair {
    Shape a, b, out;
  };
  const std::vector<Pair> pairs = {{{3, 4}, {3, 4}, {3, 4}},       {{3, 4}, {4}, {3, 4}},       {{4}, {3, 4}, {3, 4}},
                                   {{3, 1}, {1, 4}, {3, 4}},       {{2, 3, 4}, {3, 1}, {2, 3, 4}}, {{1, 3, 1}, {2, 1, 4}, {2, 3, 4}},
                                   {{}, {3, 4}, {3, 4}},           {{3, 4}, {}, {3, 4}},        {{1}, {2, 3}, {2, 3}},
                                   {{2, 0}, {1}, {2, 0}}};
  uint64_t seed = 100;
  for (const Pair& p : pairs) {
    Tensor a = relayout(test::random(p.a, seed++, dtype), layout);
    // Divisors near 2, well away from 0.
    Tensor b = relayout(ops::scale_shift(test::random(p.b, seed++, dtype), 0.25, 2.0), layout);
    Tensor y = ops::binary(op, a, b);
    INFO(ops::binary_op_name(op) << " " << shape_str(p.a) << " " << shape_str(p.b));
    REQUIRE(y.shape() == p.out);
    REQUIRE(y.dtype() == dtype);
    REQUIRE(y.is_contiguous());
    const double tol = dtype == DType::f32 ? 1e-6 : 1e-15;
    test::require_close(y, ref_broadcast(op, a, b, p.out), tol, tol);
    test::require_close(call_binary(op, a, b), ref_broadcast(op, a, b, p.out), tol, tol);
  }
}

TEST_CASE("large elementwise ops split between threads, across row boundaries", "[binary]") {
  // 300 x 257 elements: several thread chunks, each starting mid-row.
  Tensor a = test::random({300, 257}, 110, DType::f32);
  Tensor b = test::random({257}, 111, DType::f32);
  test::require_close(a * b, ref_broadcast(BinaryOp::mul, a, b, {300, 257}), 1e-6, 1e-6);
  Tensor at = test::transposed(test::random({300, 257}, 112, DType::f32));
  test::require_close(at - a, ref_broadcast(BinaryOp::sub, at, a, {300, 257}), 1e-6, 1e-6);
  Tensor x = test::random({300, 257}, 113, DType::f64);
  test::require_close(exp(x), map_values(x, [](double v) { return std::exp(v); }), 1e-15, 1e-14);
}

TEST_CASE("scalar variants and operators", "[binary]") {
  Tensor x = test::strided(test::random({2, 3}, 120));
  const std::vector<double> v = x.to_vector();
  auto expect = [&](const Tensor& got, const std::function<double(double)>& f) {
    test::require_close(got, map_values(x, f), 1e-15, 1e-15);
  };
  expect(x + 2.0, [](double a) { return a + 2; });
  expect(2.0 + x, [](double a) { return 2 + a; });
  expect(x - 2.0, [](double a) { return a - 2; });
  expect(2.0 - x, [](double a) { return 2 - a; });
  expect(x * 3.0, [](double a) { return a * 3; });
  expect(3.0 * x, [](double a) { return 3 * a; });
  expect(x / 4.0, [](double a) { return a / 4; });
  expect(-x, [](double a) { return -a; });
  expect(add(x, 0.5), [](double a) { return a + 0.5; });
  expect(mul(x, -1.5), [](double a) { return a * -1.5; });
  expect(x + x, [](double a) { return a + a; });
  expect(x - x, [](double) { return 0.0; });
  expect(x * x, [](double a) { return a * a; });
  expect(x / (x * x), [](double a) { return 1 / a; });
  test::require_close(ops::scale_shift(x, 3, -1), map_values(x, [](double a) { return 3 * a - 1; }));
}

TEST_CASE("in-place add_ and scale_", "[binary]") {
  Tensor buffer = zeros({2, 6}, DType::f64);
  Tensor dst = buffer.slice(1, 0, 6, 2);  // [2, 3], every other column
  ops::copy_(dst, tensor({{1, 2, 3}, {4, 5, 6}}, DType::f64));
  ops::add_(dst, tensor({10, 20, 30}, DType::f64), 0.5);  // broadcast source, alpha
  test::require_close(dst, {6, 12, 18, 9, 15, 21});
  ops::scale_(dst, 2);
  test::require_close(buffer, {12, 0, 24, 0, 36, 0, 18, 0, 30, 0, 42, 0});

  // A f64 destination keeps f64 precision when the source is f32.
  Tensor precise = full({1}, 1.0, DType::f64);
  ops::add_(precise, full({1}, 1e-9, DType::f32));
  REQUIRE(precise.item() == 1.0 + double(float(1e-9)));

  // A bf16 destination accumulates in f32 and rounds once.
  const DType half = GENERATE(DType::bf16, DType::f16);
  Tensor h = full({3}, 1.0, half);
  ops::add_(h, tensor({0.25, 1.0 / 1024, 3}, DType::f32));
  REQUIRE(h.to_vector() == std::vector<double>{round_to(half, 1.25f), round_to(half, 1.0f + 1.0f / 1024), 4});
  ops::scale_(h, 0.5);
  REQUIRE(h.to_vector()[2] == 2.0);
}

TEST_CASE("binary ops on bf16/f16 equal the f32 result rounded to the dtype", "[binary][half]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  const BinaryOp op = GENERATE(BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div);
  Tensor a = test::random({4, 5}, 130, dtype);
  Tensor b = test::random({5}, 131, dtype, 3.0);
  Tensor y = ops::binary(op, a, b);
  REQUIRE(y.dtype() == dtype);
  const std::vector<double> va = a.to_vector(), vb = b.to_vector(), got = y.to_vector();
  for (size_t i = 0; i < got.size(); ++i) {
    const float fa = float(va[i]), fb = float(vb[i % 5]);
    float f = 0;
    switch (op) {
      case BinaryOp::add: f = fa + fb; break;
      case BinaryOp::sub: f = fa - fb; break;
      case BinaryOp::mul: f = fa * fb; break;
      case BinaryOp::div: f = fa / fb; break;
    }
    INFO("element " << i);
    REQUIRE(got[i] == round_to(dtype, f));
  }
}

TEST_CASE("binary op gradients, with broadcasting both ways", "[binary][grad]") {
  const BinaryOp op = GENERATE(BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div);
  struct Pair {
    Shape a, b;
  };
  for (const Pair& p : {Pair{{2, 3}, {2, 3}}, Pair{{2, 3}, {3}}, Pair{{3}, {2, 3}}, Pair{{2, 1}, {1, 3}},
                        Pair{{2, 3}, {}}, Pair{{}, {2, 3}}}) {
    INFO(ops::binary_op_name(op) << " " << shape_str(p.a) << " " << shape_str(p.b));
    Tensor a = test::leaf(test::random(p.a, 140));
    Tensor b = test::leaf(ops::scale_shift(test::random(p.b, 141), 0.25, 2.0));
    require_gradcheck([op](const std::vector<Tensor>& in) { return call_binary(op, in[0], in[1]); }, {a, b});
  }
  Tensor as = strided_leaf(test::random({2, 3}, 142));
  Tensor bs = strided_leaf(ops::scale_shift(test::random({2, 3}, 143), 0.25, 2.0));
  require_gradcheck([op](const std::vector<Tensor>& in) { return call_binary(op, in[0], in[1]); }, {as, bs});
  // The same tensor on both sides.
  require_gradcheck([op](const std::vector<Tensor>& in) { return call_binary(op, in[0], in[0] + 3.0); }, {as});
}

TEST_CASE("scalar variant gradients", "[binary][grad]") {
  Tensor x = test::leaf(test::random({2, 3}, 150));
  require_gradcheck([](const std::vector<Tensor>& in) { return (2.0 - in[0]) * 3.0 + in[0] / 4.0 - 1.0; }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return -(0.5 * in[0]) + (in[0] + 2.0); }, {x});
}

TEST_CASE("binary ops reject bad inputs", "[binary][errors]") {
  REQUIRE_THROWS_WITH(zeros({2, 3}) + zeros({4}), Catch::Contains("add: shapes [2, 3] and [4] cannot be broadcast"));
  REQUIRE_THROWS_WITH(mul(zeros({2}), zeros({2}, DType::f64)), Catch::Contains("mul: dtypes differ: f32 and f64"));
  REQUIRE_THROWS_WITH(div(zeros({2}, DType::i32), zeros({2}, DType::i32)),
                      Catch::Contains("div: expected a floating-point tensor, got i32"));
  REQUIRE_THROWS_WITH(sub(Tensor(), zeros({2})), Catch::Contains("sub: a is an undefined tensor"));
  REQUIRE_THROWS_WITH(zeros({2}, DType::i64) * 2.0, Catch::Contains("expected a floating-point tensor, got i64"));
  REQUIRE_THROWS_WITH(ops::add_(zeros({3}), zeros({2, 3})),
                      Catch::Contains("add_: source shape [2, 3] does not broadcast to destination shape [3]"));
  REQUIRE_THROWS_WITH(ops::add_(zeros({3}, DType::i32), zeros({3})), Catch::Contains("add_: expected a floating-point"));
}

// ================================================================================================
// unary ops and pow
// ================================================================================================

TEST_CASE("unary ops at hand-computed points", "[unary]") {
  Tensor x = tensor({-1, 0, 1, 4}, DType::f64);
  test::require_close(relu(x), {0, 0, 1, 4});
  test::require_close(sigmoid(x), {0.2689414213699951, 0.5, 0.7310585786300049, 0.9820137900379085}, 1e-15, 1e-15);
  test::require_close(silu(x), {-0.2689414213699951, 0, 0.7310585786300049, 3.928055160151634}, 1e-15, 1e-15);
  // GELU, tanh approximation (not the erf form): gelu(1) = 0.8411920, gelu(-1) = -0.1588080.
  test::require_close(gelu(x), {-0.15880800939172324, 0, 0.8411919906082768, 3.9999297540518075}, 1e-15, 1e-15);
  test::require_close(rsqrt(tensor({4, 0.25}, DType::f64)), {0.5, 2});
  REQUIRE(tanh(tensor({0}, DType::f64)).item() == 0.0);
  test::require_close(log(tensor({1, std::exp(2.0)}, DType::f64)), {0, 2}, 1e-15, 1e-15);
  // Saturation: no NaN at the extremes.
  test::require_close(sigmoid(tensor({-1000, 1000}, DType::f32)), {0, 1});
  test::require_close(silu(tensor({-1000, 1000}, DType::f32)), {0, 1000});
}

TEST_CASE("every unary op matches an f64 loop, for every layout", "[unary]") {
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const int layout = GENERATE(0, 1, 2);
  for (UnaryOp op : kUnaryOps) {
    INFO(ops::unary_op_name(op));
    Tensor x = relayout(unary_input(op, {3, 5}, 200, dtype), layout);
    const double tol = dtype == DType::f32 ? 2e-6 : 1e-14;
    test::require_close(call_unary(op, x), map_values(x, [op](double v) { return ref_unary(op, v); }), tol, tol);
  }
}

TEST_CASE("unary ops on bf16/f16 equal the f32 result rounded to the dtype", "[unary][half]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  for (UnaryOp op : kUnaryOps) {
    INFO(ops::unary_op_name(op));
    Tensor x = unary_input(op, {40}, 210, dtype);
    Tensor y = call_unary(op, x);
    REQUIRE(y.dtype() == dtype);
    const std::vector<double> got = y.to_vector(), in = x.to_vector();
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("x = " << in[i]);
      REQUIRE(got[i] == round_to(dtype, ref_unary_f32(op, float(in[i]))));
    }
  }
}

TEST_CASE("unary op gradients", "[unary][grad]") {
  for (UnaryOp op : kUnaryOps) {
    INFO(ops::unary_op_name(op));
    Tensor x = test::leaf(unary_input(op, {2, 3}, 220));
    require_gradcheck([op](const std::vector<Tensor>& in) { return call_unary(op, in[0]); }, {x});
    Tensor xs = strided_leaf(unary_input(op, {2, 3}, 221));
    require_gradcheck([op](const std::vector<Tensor>& in) { return call_unary(op, in[0]); }, {xs});
  }
}

TEST_CASE("unary_backward takes the input's dtype and computes in it", "[unary]") {
  Tensor x = tensor({0.5, 2}, DType::f64);
  Tensor y = ops::unary(UnaryOp::log, x);
  Tensor g = ops::unary_backward(UnaryOp::log, full({2}, 1.0, DType::f32), x, y);
  REQUIRE(g.dtype() == DType::f64);
  test::require_close(g, {2, 0.5}, 0, 0);
  Tensor xh = tensor({0.5, 2}, DType::bf16);
  Tensor gh = ops::unary_backward(UnaryOp::exp, full({2}, 1.0, DType::bf16), xh, ops::unary(UnaryOp::exp, xh));
  REQUIRE(gh.dtype() == DType::bf16);
  test::require_close(gh, {std::exp(0.5), std::exp(2.0)}, 0, 1.0 / 128);
  REQUIRE_THROWS_WITH(ops::unary_backward(UnaryOp::exp, zeros({3}), zeros({2}), zeros({2})),
                      Catch::Contains("exp_backward: grad shape [3], input shape [2] and output shape [2] must match"));
}

TEST_CASE("pow with scalar exponents", "[unary][pow]") {
  const double exponent = GENERATE(2.0, 3.0, 0.5, -1.0, 0.0, 1.5);
  Tensor x = test::strided(ops::unary(UnaryOp::exp, test::random({3, 4}, 230)));  // positive bases
  test::require_close(pow(x, exponent), map_values(x, [exponent](double v) { return std::pow(v, exponent); }), 1e-14,
                      1e-14);
  Tensor leaf = test::leaf(ops::unary(UnaryOp::exp, test::random({2, 3}, 231)));
  require_gradcheck([exponent](const std::vector<Tensor>& in) { return pow(in[0], exponent); }, {leaf});
}

TEST_CASE("pow of negative bases with integer exponents, and x^0 at 0", "[unary][pow]") {
  Tensor x = tensor({-2, -1, 0, 3}, DType::f64);
  test::require_close(pow(x, 3), {-8, -1, 0, 27});
  test::require_close(pow(x, 2), {4, 1, 0, 9});
  // d/dx x^0 is 0 everywhere, also at x = 0 (not 0 * inf).
  test::require_close(ops::pow_scalar_backward(ones({4}, DType::f64), x, 0), {0, 0, 0, 0});
  test::require_close(ops::pow_scalar_backward(ones({4}, DType::f64), x, 2), {-4, -2, 0, 6});
  Tensor h = tensor({1.5, -2}, DType::f16);
  REQUIRE(pow(h, 2).dtype() == DType::f16);
  test::require_close(pow(h, 2), {2.25, 4});
}

TEST_CASE("unary ops and pow reject bad inputs", "[unary][errors]") {
  REQUIRE_THROWS_WITH(exp(zeros({2}, DType::i32)), Catch::Contains("exp: expected a floating-point tensor, got i32"));
  REQUIRE_THROWS_WITH(gelu(zeros({2}, DType::i64)), Catch::Contains("gelu: expected a floating-point tensor, got i64"));
  REQUIRE_THROWS_WITH(relu(Tensor()), Catch::Contains("relu: input is an undefined tensor"));
  REQUIRE_THROWS_WITH(pow(zeros({2}, DType::i64), 2), Catch::Contains("pow: expected a floating-point tensor, got i64"));
  REQUIRE_THROWS_WITH(ops::pow_scalar_backward(zeros({2}), zeros({3}), 2),
                      Catch::Contains("pow_backward: grad shape [2] differs from input shape [3]"));
}

// ================================================================================================
// masked_fill and causal_mask
// ================================================================================================

TEST_CASE("causal_mask marks the future", "[mask]") {
  Tensor m = causal_mask(4);
  REQUIRE(m.shape() == Shape{4, 4});
  REQUIRE(m.dtype() == DType::i32);
  REQUIRE(m.to_vector() == std::vector<double>{0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  REQUIRE(causal_mask(0).numel() == 0);
  REQUIRE_THROWS_WITH(causal_mask(-1), Catch::Contains("causal_mask: negative size -1"));
}

TEST_CASE("masked_fill with broadcast masks of any dtype", "[mask]") {
  const DType mask_dtype = GENERATE(DType::i32, DType::i64, DType::f32, DType::bf16);
  Tensor x = test::transposed(test::random({2, 4, 4}, 300));
  Tensor mask = ops::to_dtype(causal_mask(4), mask_dtype);
  Tensor y = masked_fill(x, mask, -INFINITY);
  const std::vector<double> v = x.to_vector(), got = y.to_vector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        const size_t k = size_t(b * 16 + i * 4 + j);
        REQUIRE(got[k] == (j > i ? -INFINITY : v[k]));
      }
  // A row mask [4] broadcast over [3, 4], an integer input.
  Tensor xi = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}, DType::i64);
  Tensor yi = masked_fill(xi, tensor({1, 0, 0, 1}, DType::f32), 0);
  REQUIRE(yi.to_vector() == std::vector<double>{0, 2, 3, 0, 0, 6, 7, 0, 0, 10, 11, 0});
  // Softmax after a causal fill: the first row attends only to itself.
  Tensor attn = softmax(masked_fill(zeros({3, 3}), causal_mask(3), -INFINITY), -1);
  test::require_close(attn, {1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-7, 0);
}

TEST_CASE("masked_fill passes no gradient through filled positions", "[mask][grad]") {
  Tensor x = test::leaf(test::random({3, 3}, 310));
  Tensor mask = causal_mask(3);
  require_gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0], mask, 7.0) * in[0]; }, {x});
  x.zero_grad();
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = sum(masked_fill(x, mask, 0.0));
  }
  tape.backward(loss);
  test::require_close(x.grad(), {1, 0, 0, 1, 1, 0, 1, 1, 1});
}

TEST_CASE("masked_fill rejects masks that do not broadcast", "[mask][errors]") {
  REQUIRE_THROWS_WITH(masked_fill(zeros({2, 4}), zeros({3}), 0),
                      Catch::Contains("masked_fill: shapes [2, 4] and [3] cannot be broadcast"));
  REQUIRE_THROWS_WITH(masked_fill(zeros({4}), zeros({2, 4}), 0),
                      Catch::Contains("masked_fill: mask shape [2, 4] does not broadcast to input shape [4]"));
  REQUIRE_THROWS_WITH(masked_fill(zeros({4}), Tensor(), 0), Catch::Contains("masked_fill: mask is an undefined tensor"));
}

// ================================================================================================
// copies and dtype conversion
// ================================================================================================

TEST_CASE("to_dtype between every pair of dtypes keeps representable values", "[copy]") {
  const DType from = GENERATE(DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64);
  const DType to = GENERATE(DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64);
  const std::vector<double> v = {-3, -1, 0, 1, 2, 7, 100, -128};
  Tensor x = test::strided(from_vector(v, {2, 4}, from));
  Tensor y = ops::to_dtype(x, to);
  REQUIRE(y.dtype() == to);
  REQUIRE(y.shape() == Shape{2, 4});
  REQUIRE(y.to_vector() == v);
  if (from == to) REQUIRE(y.same_as(x));  // no copy when nothing changes
  Tensor dst = zeros({2, 4}, to);
  ops::copy_(dst.transpose(0, 1), x.transpose(0, 1));
  REQUIRE(dst.to_vector() == v);
}

TEST_CASE("conversion to bf16 rounds to nearest, ties to even", "[copy][half]") {
  const double e = std::ldexp(1.0, -8);  // half a bf16 ulp at 1
  Tensor f = from_vector(std::vector<double>{1 + e, 1 + 3 * e, 1 + e + std::ldexp(1.0, -20), -(1 + e), 3e38, 1e-40},
                         {6}, DType::f32);
  const std::vector<double> got = ops::to_dtype(f, DType::bf16).to_vector();
  REQUIRE(got[0] == 1.0);                      // tie -> even (1.0)
  REQUIRE(got[1] == 1 + 4 * e);                // tie -> even (1 + 2^-6)
  REQUIRE(got[2] == 1 + 2 * e);                // above the tie -> up
  REQUIRE(got[3] == -1.0);
  REQUIRE(got[4] == 3.00405527047391e38);      // nearest bf16 to 3e38, not inf
  REQUIRE(got[5] == double(float(bf16(1e-40f))));  // subnormals survive
  REQUIRE(std::isnan(ops::to_dtype(tensor({NAN}), DType::bf16).item()));
  // From f64, rounding happens once: f64 -> f32 -> bf16 would turn this into the tie, then 1.0.
  Tensor d = from_vector(std::vector<double>{1 + e + std::ldexp(1.0, -30), 1 + e - std::ldexp(1.0, -30)}, {2}, DType::f64);
  REQUIRE(ops::to_dtype(d, DType::bf16).to_vector() == std::vector<double>{1 + 2 * e, 1.0});
}

TEST_CASE("conversion to f16 rounds to nearest even, overflows to inf, keeps subnormals", "[copy][half]") {
  const double e = std::ldexp(1.0, -11);  // half an f16 ulp at 1
  Tensor f = from_vector(std::vector<double>{1 + e, 1 + 3 * e, 1 + e + std::ldexp(1.0, -20), 65519, 65520, -1e6,
                                             std::ldexp(1.0, -25), 3 * std::ldexp(1.0, -26), std::ldexp(1.0, -24)},
                         {9}, DType::f32);
  const std::vector<double> got = ops::to_dtype(f, DType::f16).to_vector();
  REQUIRE(got[0] == 1.0);
  REQUIRE(got[1] == 1 + 4 * e);
  REQUIRE(got[2] == 1 + 2 * e);
  REQUIRE(got[3] == 65504);  // the largest f16
  REQUIRE(got[4] == INFINITY);
  REQUIRE(got[5] == -INFINITY);
  REQUIRE(got[6] == 0);                         // half the smallest subnormal: tie -> even (0)
  REQUIRE(got[7] == std::ldexp(1.0, -24));      // above the tie -> the smallest subnormal
  REQUIRE(got[8] == std::ldexp(1.0, -24));
  Tensor d = from_vector(std::vector<double>{1 + e + std::ldexp(1.0, -40)}, {1}, DType::f64);
  REQUIRE(ops::to_dtype(d, DType::f16).item() == 1 + 2 * e);  // one rounding from f64
}

TEST_CASE("conversion to integers truncates toward zero", "[copy]") {
  Tensor x = tensor({-2.7, -0.5, 0.5, 2.7}, DType::f64);
  REQUIRE(ops::to_dtype(x, DType::i32).to_vector() == std::vector<double>{-2, 0, 0, 2});
  REQUIRE(ops::to_dtype(x, DType::i64).to_vector() == std::vector<double>{-2, 0, 0, 2});
}

TEST_CASE("copy_ into strided views, with broadcasting and conversion", "[copy]") {
  Tensor buffer = zeros({3, 4}, DType::f64);
  ops::copy_(buffer.slice(1, 1, 4, 2), tensor({5, 6}, DType::f32));  // [3, 2] <- [2], every other column
  REQUIRE(buffer.to_vector() == std::vector<double>{0, 5, 0, 6, 0, 5, 0, 6, 0, 5, 0, 6});
  ops::copy_(buffer.transpose(0, 1), arange(12, DType::i64).view({4, 3}));
  REQUIRE(buffer.to_vector() == std::vector<double>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11});
  ops::fill_(buffer.select(1, 2), -1);
  REQUIRE(buffer.to_vector() == std::vector<double>{0, 3, -1, 9, 1, 4, -1, 10, 2, 5, -1, 11});
  Tensor c = ops::clone(buffer.transpose(0, 1));
  REQUIRE(c.is_contiguous());
  REQUIRE(!c.storage().same_as(buffer.storage()));
  REQUIRE(c.to_vector() == buffer.transpose(0, 1).to_vector());
  REQUIRE_THROWS_WITH(ops::copy_(zeros({2, 3}), zeros({4})),
                      Catch::Contains("copy_: shapes [2, 3] and [4] cannot be broadcast"));
  REQUIRE_THROWS_WITH(ops::copy_(zeros({3}), zeros({2, 3})),
                      Catch::Contains("copy_: source shape [2, 3] does not broadcast to destination shape [3]"));
  REQUIRE_THROWS_WITH(ops::copy_(Tensor(), zeros({3})), Catch::Contains("copy_: destination is an undefined tensor"));
}

TEST_CASE("Tensor::to and clone are differentiable", "[copy][grad]") {
  Tensor x = test::leaf(test::random({2, 3}, 400));
  require_gradcheck([](const std::vector<Tensor>& in) { return in[0].clone() * in[0]; }, {x});
  // Through a dtype change the gradient comes back in the input's dtype.
  x.zero_grad();
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = sum(x.to(DType::f32) * 3.0);
  }
  tape.backward(loss);
  REQUIRE(x.grad().dtype() == DType::f64);
  test::require_close(x.grad(), std::vector<double>(6, 3.0), 0, 0);
}

// ================================================================================================
// views
// ================================================================================================

TEST_CASE("view and reshape", "[views]") {
  Tensor x = arange(12, DType::f64).view({3, 4});
  Tensor v = x.view({2, -1, 3});
  REQUIRE(v.shape() == Shape{2, 2, 3});
  REQUIRE(v.storage().same_as(x.storage()));
  REQUIRE(v.to_vector() == x.to_vector());
  Tensor t = x.transpose(0, 1);  // not contiguous: reshape copies, view refuses
  Tensor r = t.reshape({12});
  REQUIRE(!r.storage().same_as(x.storage()));
  REQUIRE(r.to_vector() == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  REQUIRE(x.reshape({4, 3}).storage().same_as(x.storage()));
  REQUIRE(x.flatten().shape() == Shape{12});
  REQUIRE_THROWS_WITH(t.view({12}), Catch::Contains("view: a tensor with shape [4, 3] and strides [1, 4] cannot be viewed as [12] without copying"));
  REQUIRE_THROWS_WITH(x.view({5, 2}), Catch::Contains("view: shape [5, 2] is invalid for [3, 4] (12 elements)"));
  REQUIRE_THROWS_WITH(x.view({-1, -1}), Catch::Contains("view: only one dimension can be -1"));
  REQUIRE_THROWS_WITH(x.reshape({5, -1}), Catch::Contains("shape [5, -1] is invalid for [3, 4]"));
}

TEST_CASE("permute and transpose move strides, not data", "[views]") {
  Tensor x = test::random({2, 3, 4}, 500);
  Tensor p = x.permute({2, 0, 1});
  REQUIRE(p.shape() == Shape{4, 2, 3});
  REQUIRE(p.storage().same_as(x.storage()));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k) REQUIRE(p.at({i, j, k}) == x.at({j, k, i}));
  Tensor t = x.transpose(-1, 0);
  REQUIRE(t.shape() == Shape{4, 3, 2});
  REQUIRE(t.at({3, 1, 0}) == x.at({0, 1, 3}));
  REQUIRE(scalar(1.0).transpose(0, -1).shape() == Shape{});
  REQUIRE_THROWS_WITH(x.permute({0, 1}), Catch::Contains("permute: 2 dims given for a tensor with shape [2, 3, 4]"));
  REQUIRE_THROWS_WITH(x.permute({0, 1, 1}), Catch::Contains("permute: dim 1 repeated in [0, 1, 1]"));
  REQUIRE_THROWS_WITH(x.transpose(0, 3), Catch::Contains("transpose: dim 3 is out of range"));
}

TEST_CASE("slice with steps and python-style bounds, narrow, select", "[views]") {
  Tensor x = arange(10, DType::f64);
  REQUIRE(x.slice(0, 1, 8, 3).to_vector() == std::vector<double>{1, 4, 7});
  REQUIRE(x.slice(0, -3, 100).to_vector() == std::vector<double>{7, 8, 9});
  REQUIRE(x.slice(0, 5, 2).numel() == 0);
  REQUIRE(x.slice(0, 0, 10, 4).to_vector() == std::vector<double>{0, 4, 8});
  Tensor m = arange(12, DType::f64).view({3, 4});
  REQUIRE(m.slice(1, 1, 4, 2).to_vector() == std::vector<double>{1, 3, 5, 7, 9, 11});
  REQUIRE(m.narrow(0, 1, 2).to_vector() == std::vector<double>{4, 5, 6, 7, 8, 9, 10, 11});
  REQUIRE(m.select(1, -1).to_vector() == std::vector<double>{3, 7, 11});
  REQUIRE(m.select(0, 2).shape() == Shape{4});
  REQUIRE(m.slice(1, 0, 4, 2).storage().same_as(m.storage()));
  REQUIRE_THROWS_WITH(x.slice(0, 0, 5, 0), Catch::Contains("slice: step must be positive, got 0"));
  REQUIRE_THROWS_WITH(m.narrow(0, 2, 2), Catch::Contains("narrow: range [2, 4) is outside dim 0 of size 3"));
  REQUIRE_THROWS_WITH(m.select(0, 3), Catch::Contains("select: index 3 is out of range for dim 0 of size 3"));
  REQUIRE_THROWS_WITH(m.select(2, 0), Catch::Contains("select: dim 2 is out of range"));
  REQUIRE_THROWS_WITH(scalar(1.0).slice(0, 0, 1), Catch::Contains("slice: expected a tensor with at least one dimension"));
  REQUIRE_THROWS_WITH(scalar(1.0).select(0, 0), Catch::Contains("select: expected a tensor with at least one dimension"));
}

TEST_CASE("expand, squeeze, unsqueeze, contiguous", "[views]") {
  Tensor x = tensor({1, 2, 3}, DType::f64).view({3, 1});
  Tensor e = x.expand({2, 3, 4});
  REQUIRE(e.shape() == Shape{2, 3, 4});
  REQUIRE(e.strides() == Strides{0, 1, 0});
  REQUIRE(e.at({1, 2, 3}) == 3);
  REQUIRE(x.expand({-1, 5}).shape() == Shape{3, 5});
  REQUIRE(x.unsqueeze(0).shape() == Shape{1, 3, 1});
  REQUIRE(x.unsqueeze(-1).shape() == Shape{3, 1, 1});
  REQUIRE(x.squeeze(1).shape() == Shape{3});
  REQUIRE(x.squeeze(0).shape() == Shape{3, 1});  // size 3: unchanged
  REQUIRE(scalar(2.0).squeeze(0).shape() == Shape{});
  REQUIRE(x.contiguous().same_as(x));
  Tensor c = e.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE(c.to_vector() == e.to_vector());
  REQUIRE_THROWS_WITH(x.expand({3, 2, 2}), Catch::Contains("expand: shape [3, 1] cannot be expanded to [3, 2, 2]"));
  REQUIRE_THROWS_WITH(x.expand({4}), Catch::Contains("expand: cannot expand shape [3, 1] to [4] (fewer dimensions)"));
  REQUIRE_THROWS_WITH(x.expand({-1, -2}), Catch::Contains("expand: shape [3, 1] cannot be expanded to [-1, -2]"));
  REQUIRE_THROWS_WITH(x.expand({-1, 3, 1}), Catch::Contains("expand: size -1 is not allowed for new leading dim 0"));
  REQUIRE_THROWS_WITH(x.unsqueeze(3), Catch::Contains("unsqueeze: dim 3 is out of range"));
  REQUIRE_THROWS_WITH(x.squeeze(2), Catch::Contains("squeeze: dim 2 is out of range"));
}

TEST_CASE("view gradients", "[views][grad]") {
  Tensor x = test::leaf(test::random({2, 3, 4}, 510));
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Fn>> views = {
      {"view", [](const Tensor& t) { return t.contiguous().view({4, -1}); }},
      {"reshape of a transpose", [](const Tensor& t) { return t.transpose(0, 2).reshape({-1}); }},
      {"permute", [](const Tensor& t) { return t.permute({1, 2, 0}); }},
      {"transpose", [](const Tensor& t) { return t.transpose(-1, -2); }},
      {"slice with step", [](const Tensor& t) { return t.slice(2, 1, 4, 2); }},
      {"narrow", [](const Tensor& t) { return t.narrow(1, 1, 2); }},
      {"select", [](const Tensor& t) { return t.select(0, -1); }},
      {"expand", [](const Tensor& t) { return t.narrow(1, 0, 1).expand({3, 2, 5, 4}); }},
      {"squeeze/unsqueeze", [](const Tensor& t) { return t.narrow(0, 1, 1).squeeze(0).unsqueeze(-1); }},
      {"contiguous", [](const Tensor& t) { return t.transpose(0, 1).contiguous(); }},
      {"overlapping slices", [](const Tensor& t) { return t.slice(2, 0, 3) * t.slice(2, 1, 4); }},
  };
  for (const auto& [name, f] : views) {
    INFO(name);
    require_gradcheck([&f](const std::vector<Tensor>& in) { return f(in[0]) * 1.5; }, {x});
    Tensor xs = strided_leaf(test::random({2, 3, 4}, 511));
    require_gradcheck([&f](const std::vector<Tensor>& in) { return f(in[0]); }, {xs});
  }
}

// The dispatcher asks has_vector_form before it splits work among threads; it must name exactly the
// ops unary_f32 computes (where the CPU has AVX2: elsewhere unary_f32 does nothing for every op).
TEST_CASE("avx2::has_vector_form names exactly the ops unary_f32 computes", "[unary]") {
  for (UnaryOp op : {UnaryOp::neg, UnaryOp::exp, UnaryOp::log, UnaryOp::sqrt, UnaryOp::rsqrt, UnaryOp::tanh,
                     UnaryOp::relu, UnaryOp::gelu, UnaryOp::silu, UnaryOp::sigmoid}) {
    INFO(brigade::ops::unary_op_name(op));
    float in[8] = {0.5f, -1, 2, 0, 3, -4, 1, 0.25f}, out[8] = {};
    const bool computed = brigade::cpu::avx2::unary_f32(op, out, in, 8);
    if (brigade::cpu::avx2::available()) CHECK(computed == brigade::cpu::avx2::has_vector_form(op));
    else CHECK_FALSE(computed);
  }
}

// On CPUs with AVX2 the exponential activations on contiguous f32 run eight at a time with their own
// exp (kernels/cpu/elementwise_avx2.cpp); elsewhere through libm. Either way: within a few ulp of the
// f64 value over exp's whole range, the special values right, and an element's result independent of
// where it sits (the last partial group of eight included).
TEST_CASE("f32 exp, sigmoid, silu and gelu: within a few ulp of f64 everywhere, special values exact", "[unary]") {
  std::vector<double> xs;
  for (double x = -100; x <= 100; x += 0.01) xs.push_back(x);
  for (double x : {-87.4, -87.3365, -87.33, -0.0, 0.0, 1e-30, -1e-30, 88.72, 88.7228, 88.73}) xs.push_back(x);
  const Tensor x = from_vector(xs, {int64_t(xs.size())}, DType::f32);
  const std::vector<double> xv = x.to_vector();  // the f32 values, exactly
  const auto ulp_error = [](double got, double want) {
    if (std::isinf(want)) return got == want ? 0.0 : 1e9;
    // Results near the bottom of the float range (sigmoid(-100) = 3.8e-44, silu(-91.85) = -1.2e-38)
    // may flush to 0 once exp(-x) overflows: an absolute error below 2^-120 (7.5e-37) is fine.
    if (std::abs(want) < std::ldexp(1.0, -120)) return std::abs(got - want) <= std::ldexp(1.0, -120) ? 0.0 : 1e9;
    const double ulp = std::ldexp(1.0, std::ilogb(float(want)) - 23);  // an f32 ulp at want
    return std::abs(got - want) / ulp;
  };
  // An f32 computation of f(x) errs by a few ulp times f's condition number |x f'(x) / f(x)| (an
  // ulp's change in an intermediate value moves the result that many ulp): gelu(-9.9) has a
  // condition of ~225, so even a correctly rounded exp leaves it ~50 ulp from the f64 value.
  const auto condition = [](UnaryOp op, double x) {
    const double h = 1e-6 * std::max(1.0, std::abs(x)), f = ref_unary(op, x);
    return f == 0 ? 0.0 : std::abs(x * (ref_unary(op, x + h) - ref_unary(op, x - h)) / (2 * h) / f);
  };
  for (UnaryOp op : {UnaryOp::exp, UnaryOp::sigmoid, UnaryOp::silu, UnaryOp::gelu}) {
    INFO(ops::unary_op_name(op));
    const std::vector<double> got = ops::unary(op, x).to_vector();
    for (size_t i = 0; i < xv.size(); ++i) {
      const double want = double(float(ref_unary(op, xv[i])));  // the f64 value rounded to f32
      const double err = ulp_error(got[i], want);
      // exp and sigmoid take x as it is (no intermediate rounding to amplify): a flat few ulp.
      const double allowed = op == UnaryOp::exp ? 3 : op == UnaryOp::sigmoid ? 4 : 3 + 2 * condition(op, xv[i]);
      if (err > allowed) {
        INFO("x = " << xv[i] << ": got " << got[i] << ", want " << want << ", " << err << " ulp, condition "
                    << condition(op, xv[i]));
        FAIL("beyond a few ulp");
      }
    }
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Nine values, so the last one goes through the partial group.
  const Tensor special = tensor({-inf, inf, 0.0, -200.0, 200.0, 1.0, -1.0, 2.0, nan}, DType::f32);
  const std::vector<double> e = ops::unary(UnaryOp::exp, special).to_vector();
  CHECK(e[0] == 0);  // softmax's masked scores rely on exp(-inf) = 0 exactly
  CHECK(std::isinf(e[1]));
  CHECK(e[2] == 1);
  CHECK(e[3] == 0);
  CHECK(std::isinf(e[4]));
  CHECK(std::isnan(e[8]));
  const std::vector<double> s = ops::unary(UnaryOp::sigmoid, special).to_vector();
  CHECK(s[0] == 0);
  CHECK(s[1] == 1);
  CHECK(s[2] == 0.5);
  const std::vector<double> g = ops::unary(UnaryOp::gelu, special).to_vector();
  CHECK(g[1] == inf);
  CHECK(g[2] == 0);
  CHECK(g[3] == 0);  // -200 / (1 + inf)
  CHECK(g[4] == 200);
  // Position independence: each element alone equals the same element inside a long run.
  const std::vector<double> whole = ops::unary(UnaryOp::gelu, x).to_vector();
  for (size_t i : {size_t(0), size_t(7), size_t(8), size_t(13), xv.size() - 1}) {
    const Tensor one = from_vector(std::vector<double>{xv[i]}, {1}, DType::f32);
    CHECK(ops::unary(UnaryOp::gelu, one).to_vector()[0] == whole[i]);
  }
}

// The backward of gelu and silu on contiguous f32 also runs eight at a time with AVX2: against the
// f64 derivative, and against the same values through a strided view (the scalar path).
TEST_CASE("f32 gelu and silu backward: close to the f64 derivative, vector and scalar paths agree", "[unary]") {
  std::vector<double> xs;
  for (double x = -12; x <= 12; x += 0.003) xs.push_back(x);
  const int64_t n = int64_t(xs.size());
  const Tensor x = from_vector(xs, {n}, DType::f32);
  const Tensor g = ops::to_dtype(test::random({n}, 240), DType::f32);
  const std::vector<double> xv = x.to_vector(), gv = g.to_vector();
  const double pi = std::acos(-1.0);
  for (UnaryOp op : {UnaryOp::gelu, UnaryOp::silu}) {
    INFO(ops::unary_op_name(op));
    const Tensor y = ops::unary(op, x);
    const std::vector<double> got = ops::unary_backward(op, g, x, y).to_vector();
    const std::vector<double> scalar =
        ops::unary_backward(op, test::strided(g), test::strided(x), test::strided(y)).to_vector();
    for (size_t i = 0; i < xv.size(); ++i) {
      const double v = xv[i];
      double d;
      if (op == UnaryOp::silu) {
        const double s = 1 / (1 + std::exp(-v));
        d = s * (1 + v * (1 - s));
      } else {  // d/dx of x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
        const double k = std::sqrt(2 / pi), u = k * (v + 0.044715 * v * v * v), s = 1 / (1 + std::exp(-2 * u));
        d = s + v * s * (1 - s) * 2 * k * (1 + 3 * 0.044715 * v * v);
      }
      INFO("x = " << v);
      REQUIRE(std::abs(got[i] - gv[i] * d) <= 1e-6 + 1e-5 * std::abs(gv[i] * d));
      REQUIRE(std::abs(got[i] - scalar[i]) <= 1e-6 + 1e-5 * std::abs(scalar[i]));
    }
  }
}
