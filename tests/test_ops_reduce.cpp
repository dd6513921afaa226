// Reductions (sum, mean, max, argmax, sum_to), softmax/log_softmax and joining (concat, stack,
// split): forward against plain f64 loops written here, gradients by gradcheck, strided and
// broadcast inputs, and the errors bad arguments raise.
#include "test_util.h"

using namespace brigade;
using test::require_gradcheck;
using test::strided_leaf;
using test::ravel;
using test::round_to;
using test::unravel;

namespace {

// ---- index arithmetic for the references ----

std::vector<bool> dims_mask(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<bool> mask(size_t(ndim), dims.empty());
  for (int64_t d : dims) mask[size_t(d < 0 ? d + ndim : d)] = true;
  return mask;
}

Shape kept_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// f64 sum of x over the masked dims, in the row-major order of the kept dims.
std::vector<double> ref_sum(const Tensor& x, const std::vector<bool>& mask) {
  const std::vector<double> v = x.to_vector();
  const Shape out_shape = kept_shape(x.shape(), mask, true);
  std::vector<double> out(size_t(shape_numel(out_shape)), 0.0);
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    std::vector<int64_t> idx = unravel(i, x.shape());
    for (size_t d = 0; d < idx.size(); ++d)
      if (mask[d]) idx[d] = 0;
    out[size_t(ravel(idx, out_shape))] += v[size_t(i)];
  }
  return out;
}

// f64 max over one dim: values and the first index of the maximum.
void ref_max(const Tensor& x, int64_t dim, std::vector<double>& values, std::vector<double>& indices) {
  const std::vector<double> v = x.to_vector();
  Shape out_shape = x.shape();
  out_shape[size_t(dim)] = 1;
  values.assign(size_t(shape_numel(out_shape)), 0.0);
  indices.assign(values.size(), -1.0);
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    std::vector<int64_t> idx = unravel(i, x.shape());
    const int64_t along = idx[size_t(dim)];
    idx[size_t(dim)] = 0;
    const size_t o = size_t(ravel(idx, out_shape));
    if (indices[o] < 0 || v[size_t(i)] > values[o]) {
      values[o] = v[size_t(i)];
      indices[o] = double(along);
    }
  }
}

// f64 softmax (or log-softmax) along dim, the textbook way with the max subtracted.
std::vector<double> ref_softmax(const Tensor& x, int64_t dim, bool log) {
  const std::vector<double> v = x.to_vector();
  const int64_t n = x.shape()[size_t(dim)];
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    std::vector<int64_t> idx = unravel(i, x.shape());
    if (idx[size_t(dim)] != 0) continue;  // each line once, from its first element
    std::vector<size_t> line;
    for (int64_t k = 0; k < n; ++k) {
      idx[size_t(dim)] = k;
      line.push_back(size_t(ravel(idx, x.shape())));
    }
    double m = -INFINITY, total = 0;
    for (size_t p : line) m = std::max(m, v[p]);
    for (size_t p : line) total += std::exp(v[p] - m);
    for (size_t p : line) out[p] = log ? v[p] - m - std::log(total) : std::exp(v[p] - m) / total;
  }
  return out;
}

// The same values in one of several layouts, so kernels see strided and broadcast inputs.
enum Layout { contiguous_layout, strided_layout, transposed_layout, expanded_layout };

Tensor with_layout(const Tensor& t, Layout layout) {
  switch (layout) {
    case contiguous_layout: return t;
    case strided_layout: return test::strided(t);
    case transposed_layout: return test::transposed(t);
    case expanded_layout: return t.narrow(0, 0, 1).expand(t.shape());  // dim 0 has stride 0
  }
  return t;
}




}  // namespace

// ================================================================================================
// sum and mean
// ================================================================================================

TEST_CASE("sum and mean of a small matrix, computed by hand", "[reduce]") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}, DType::f64);
  test::require_close(sum(x), {21});
  REQUIRE(sum(x).shape() == Shape{});
  test::require_close(sum(x, {0}), {5, 7, 9});
  test::require_close(sum(x, {1}), {6, 15});
  test::require_close(sum(x, {-1}), {6, 15});
  test::require_close(sum(x, {0, 1}), {21});
  REQUIRE(sum(x, {1}, true).shape() == Shape{2, 1});
  REQUIRE(sum(x, {0, 1}, true).shape() == Shape{1, 1});
  test::require_close(mean(x), {3.5});
  test::require_close(mean(x, {1}), {2, 5});
  test::require_close(mean(x, {0}, true), {2.5, 3.5, 4.5});
  REQUIRE(mean(x, {0}, true).shape() == Shape{1, 3});
}

TEST_CASE("sum and mean over any dims match an f64 loop, for every layout", "[reduce]") {
  const std::vector<int64_t> dims = GENERATE(std::vector<int64_t>{}, std::vector<int64_t>{0}, std::vector<int64_t>{1},
                                             std::vector<int64_t>{2}, std::vector<int64_t>{-1},
                                             std::vector<int64_t>{0, 2}, std::vector<int64_t>{2, 0},
                                             std::vector<int64_t>{1, 2}, std::vector<int64_t>{0, 1, 2});
  const bool keepdim = GENERATE(false, true);
  const Layout layout = GENERATE(contiguous_layout, strided_layout, transposed_layout, expanded_layout);
  const DType dtype = GENERATE(DType::f32, DType::f64);
  Tensor x = with_layout(test::random({3, 4, 5}, 11, dtype), layout);
  const std::vector<bool> mask = dims_mask(dims, 3);
  const std::vector<double> expected = ref_sum(x, mask);
  int64_t count = 1;
  for (size_t d = 0; d < 3; ++d)
    if (mask[d]) count *= x.shape()[d];

  const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
  Tensor s = sum(x, dims, keepdim);
  REQUIRE(s.shape() == kept_shape(x.shape(), mask, keepdim));
  REQUIRE(s.dtype() == dtype);
  test::require_close(s, expected, tol, tol);

  std::vector<double> expected_mean = expected;
  for (double& v : expected_mean) v /= double(count);
  test::require_close(mean(x, dims, keepdim), expected_mean, tol, tol);
}

TEST_CASE("sum over a 4-D tensor with dims that are not neighbours", "[reduce]") {
  const std::vector<int64_t> dims = GENERATE(std::vector<int64_t>{0, 2}, std::vector<int64_t>{1, 3},
                                             std::vector<int64_t>{0, 1, 3}, std::vector<int64_t>{3});
  Tensor base = test::random({5, 2, 4, 3}, 12);
  Tensor x = base.permute({2, 0, 3, 1});  // [4, 5, 3, 2], every stride out of order
  test::require_close(sum(x, dims), ref_sum(x, dims_mask(dims, 4)), 1e-12, 1e-12);
  test::require_close(sum(x, dims, true), ref_sum(x, dims_mask(dims, 4)), 1e-12, 1e-12);
}

TEST_CASE("f32 sums accumulate in double", "[reduce]") {
  // 1e8 + 1000 ones: in float each +1 is lost (the spacing at 1e8 is 8); in double all survive,
  // and 100001000 is a float.
  std::vector<double> v(1001, 1.0);
  v[0] = 1e8;
  Tensor x = from_vector(v, {1001}, DType::f32);
  REQUIRE(sum(x).item() == 100001000.0);
  REQUIRE(sum(x.view({7, 143}), {0, 1}).item() == 100001000.0);
}

TEST_CASE("sums are the same bits for any thread count and any layout", "[reduce]") {
  // Big enough that both tilings (sum over dim 0 and over dim 1) are split between threads.
  Tensor x = test::random({256, 300}, 13, DType::f32);
  const int threads = num_threads();
  for (int64_t dim : {0, 1}) {
    Tensor many = sum(x, {dim});
    set_num_threads(1);
    Tensor one = sum(x, {dim});
    set_num_threads(threads);
    test::require_equal(many, one);
    test::require_equal(sum(test::transposed(x), {dim}), one);
    test::require_close(one, ref_sum(x, dims_mask({dim}, 2)), 1e-4, 1e-5);
  }
}

TEST_CASE("sum of bf16/f16 equals the f32 result rounded to the dtype", "[reduce]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  Tensor x = test::random({4, 6}, 14, dtype);
  Tensor s = sum(x, {1});
  REQUIRE(s.dtype() == dtype);
  const std::vector<double> exact = ref_sum(x, dims_mask({1}, 2));  // sums of 16-bit values: exact in f64
  std::vector<double> expected;
  for (double e : exact) expected.push_back(round_to(dtype, float(e)));
  REQUIRE(s.to_vector() == expected);
}

TEST_CASE("sum and mean of empty tensors and scalars", "[reduce]") {
  Tensor empty_rows = zeros({0, 3}, DType::f64);
  test::require_close(sum(empty_rows, {0}), {0, 0, 0});
  REQUIRE(sum(empty_rows, {1}).shape() == Shape{0});
  REQUIRE(std::isnan(mean(empty_rows).item()));
  Tensor s = scalar(2.5, DType::f64);
  REQUIRE(sum(s).item() == 2.5);
  REQUIRE(sum(s, {0}).item() == 2.5);  // dim 0 of a scalar names the scalar itself
  REQUIRE(mean(s, {-1}, true).shape() == Shape{});
}

TEST_CASE("sum and mean gradients", "[reduce][grad]") {
  const std::vector<int64_t> dims = GENERATE(std::vector<int64_t>{}, std::vector<int64_t>{0}, std::vector<int64_t>{-1},
                                             std::vector<int64_t>{0, 2});
  const bool keepdim = GENERATE(false, true);
  Tensor x = test::leaf(test::random({2, 3, 4}, 15));
  require_gradcheck([&](const std::vector<Tensor>& in) { return sum(in[0], dims, keepdim); }, {x});
  require_gradcheck([&](const std::vector<Tensor>& in) { return mean(in[0], dims, keepdim); }, {x});
  Tensor xs = strided_leaf(test::random({2, 3, 4}, 16));
  require_gradcheck([&](const std::vector<Tensor>& in) { return mean(in[0] * in[0], dims, keepdim); }, {xs});
}

TEST_CASE("the gradient of mean is 1/count everywhere", "[reduce][grad]") {
  Tensor x = test::leaf(test::random({3, 4}, 17));
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = sum(mean(x, {1}));
  }
  tape.backward(loss);
  test::require_close(x.grad(), std::vector<double>(12, 0.25), 1e-15, 0);
}

TEST_CASE("sum and mean reject bad arguments", "[reduce][errors]") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(sum(x, {2}), Catch::Contains("sum: dim 2 is out of range"));
  REQUIRE_THROWS_WITH(mean(x, {-3}), Catch::Contains("mean: dim -3 is out of range"));
  REQUIRE_THROWS_WITH(sum(x, {1, -1}), Catch::Contains("sum: dim -1 appears more than once"));
  REQUIRE_THROWS_WITH(sum(zeros({2}, DType::i64)), Catch::Contains("sum: expected a floating-point tensor, got i64"));
  REQUIRE_THROWS_WITH(mean(zeros({2}, DType::i32)), Catch::Contains("mean: expected a floating-point tensor, got i32"));
  REQUIRE_THROWS_WITH(sum(Tensor()), Catch::Contains("sum: input is an undefined tensor"));
}

// ================================================================================================
// max and argmax
// ================================================================================================

TEST_CASE("max and argmax of a small matrix, ties go to the first", "[reduce][max]") {
  Tensor x = tensor({{1, 5, 5}, {7, 2, 7}}, DType::f64);
  auto [values, indices] = ops::max(x, 1, false);
  test::require_close(values, {5, 7});
  REQUIRE(indices.dtype() == DType::i64);
  REQUIRE(indices.to_vector() == std::vector<double>{1, 0});
  auto [v0, i0] = ops::max(x, 0, true);
  REQUIRE(v0.shape() == Shape{1, 3});
  test::require_close(v0, {7, 5, 7});
  REQUIRE(i0.to_vector() == std::vector<double>{1, 0, 1});
  REQUIRE(argmax(x, -1).to_vector() == std::vector<double>{1, 0});
  REQUIRE(argmax(x, 0, true).shape() == Shape{1, 3});
  test::require_close(max(x, 1), {5, 7});
}

TEST_CASE("max treats NaN as the maximum", "[reduce][max]") {
  Tensor x = tensor({1, NAN, 3, NAN}, DType::f32);
  auto [values, indices] = ops::max(x, 0, false);
  REQUIRE(std::isnan(values.item()));
  REQUIRE(indices.item() == 1);
}

TEST_CASE("max over each dim matches an f64 loop, for every layout and dtype", "[reduce][max]") {
  const int64_t dim = GENERATE(0, 1, 2, -1);
  const bool keepdim = GENERATE(false, true);
  const Layout layout = GENERATE(contiguous_layout, strided_layout, transposed_layout, expanded_layout);
  const DType dtype = GENERATE(DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64);
  // Integer dtypes get small integers, so ties are common.
  Tensor values = is_integral(dtype) ? ops::to_dtype(ops::scale_shift(test::random({3, 4, 5}, 21), 3, 0), dtype)
                                     : test::random({3, 4, 5}, 21, dtype);
  Tensor x = with_layout(values, layout);
  const int64_t d = dim < 0 ? dim + 3 : dim;
  std::vector<double> ref_values, ref_indices;
  ref_max(x, d, ref_values, ref_indices);

  auto [v, i] = ops::max(x, dim, keepdim);
  Shape expected_shape = x.shape();
  if (keepdim) expected_shape[size_t(d)] = 1;
  else expected_shape.erase(expected_shape.begin() + d);
  REQUIRE(v.shape() == expected_shape);
  REQUIRE(i.shape() == expected_shape);
  REQUIRE(v.dtype() == dtype);
  REQUIRE(v.to_vector() == ref_values);
  REQUIRE(i.to_vector() == ref_indices);
  test::require_equal(argmax(x, dim, keepdim), i);
}

TEST_CASE("max over a long dim and many outputs (split between threads)", "[reduce][max]") {
  Tensor x = test::random({300, 260}, 22, DType::f32);
  for (int64_t dim : {0, 1}) {
    std::vector<double> ref_values, ref_indices;
    ref_max(x, dim, ref_values, ref_indices);
    auto [v, i] = ops::max(x, dim, true);
    REQUIRE(v.to_vector() == ref_values);
    REQUIRE(i.to_vector() == ref_indices);
  }
}

TEST_CASE("max of a scalar is itself at index 0", "[reduce][max]") {
  auto [v, i] = ops::max(scalar(4.0, DType::f64), 0, false);
  REQUIRE(v.shape() == Shape{});
  REQUIRE(v.item() == 4.0);
  REQUIRE(i.item() == 0);
}

TEST_CASE("max gradient flows to the first maximum only", "[reduce][max][grad]") {
  Tensor x = test::leaf(tensor({{1, 5, 5}, {7, 2, 3}}, DType::f64));
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = sum(max(x, 1) * tensor({2, 3}, DType::f64));
  }
  tape.backward(loss);
  test::require_close(x.grad(), {0, 2, 0, 3, 0, 0});
}

TEST_CASE("max gradcheck over each dim", "[reduce][max][grad]") {
  const int64_t dim = GENERATE(0, 1, -1);
  const bool keepdim = GENERATE(false, true);
  Tensor x = test::leaf(test::random({3, 4, 2}, 23));  // random values: no ties
  require_gradcheck([&](const std::vector<Tensor>& in) { return max(in[0], dim, keepdim); }, {x});
  Tensor xs = strided_leaf(test::random({3, 4, 2}, 24));
  require_gradcheck([&](const std::vector<Tensor>& in) { return max(in[0], dim, keepdim); }, {xs});
}

TEST_CASE("max_backward scatters a strided gradient", "[reduce][max]") {
  Tensor grad = test::transposed(tensor({{10, 20}, {30, 40}, {50, 60}}, DType::f64));  // [3, 2] non-contiguous
  Tensor indices = from_vector(std::vector<double>{2, 0, 1, 1, 0, 2}, {3, 2}, DType::i64);
  Tensor gx = ops::max_backward(grad, indices, {3, 3, 2}, 1, false);  // reduced dim 1 of [3, 3, 2]
  std::vector<double> expected(18, 0.0);
  const std::vector<double> g = grad.to_vector(), idx = indices.to_vector();
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t c = 0; c < 2; ++c) expected[size_t(a * 6 + int64_t(idx[size_t(a * 2 + c)]) * 2 + c)] = g[size_t(a * 2 + c)];
  test::require_close(gx, expected, 0, 0);
}

TEST_CASE("max, argmax and max_backward reject bad arguments", "[reduce][max][errors]") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(ops::max(x, 2, false), Catch::Contains("max: dim 2 is out of range"));
  REQUIRE_THROWS_WITH(argmax(x, -3), Catch::Contains("argmax: dim -3 is out of range"));
  REQUIRE_THROWS_WITH(ops::max(zeros({2, 0}), 1, false), Catch::Contains("max: cannot take the maximum over dim 1 of size 0"));
  Tensor grad = zeros({2});
  Tensor good = zeros({2}, DType::i64);
  REQUIRE_THROWS_WITH(ops::max_backward(grad, from_vector(std::vector<double>{0, 3}, {2}, DType::i64), {2, 3}, 1, false),
                      Catch::Contains("max_backward: index 3 is out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(ops::max_backward(grad, from_vector(std::vector<double>{-1, 0}, {2}, DType::i64), {2, 3}, 1, false),
                      Catch::Contains("index -1 is out of range"));
  REQUIRE_THROWS_WITH(ops::max_backward(grad, zeros({2}, DType::i32), {2, 3}, 1, false),
                      Catch::Contains("max_backward: indices must be i64, got i32"));
  REQUIRE_THROWS_WITH(ops::max_backward(zeros({3}), good, {2, 3}, 1, false),
                      Catch::Contains("max_backward: grad shape [3] and indices shape [2] must both be [2]"));
  REQUIRE_THROWS_WITH(ops::max_backward(grad, good, {2, 3}, 1, true), Catch::Contains("must both be [2, 1]"));
}

// ================================================================================================
// sum_to
// ================================================================================================

TEST_CASE("sum_to undoes broadcasting", "[reduce][sum_to]") {
  const Layout layout = GENERATE(contiguous_layout, strided_layout, transposed_layout);
  Tensor x = with_layout(test::random({2, 3, 4}, 31), layout);
  struct Case {
    Shape target;
    std::vector<int64_t> dims;  // what sum_to must sum over
  };
  for (const Case& c : {Case{{3, 4}, {0}}, Case{{3, 1}, {0, 2}}, Case{{4}, {0, 1}}, Case{{1, 4}, {0, 1}},
                        Case{{}, {0, 1, 2}}, Case{{2, 1, 1}, {1, 2}}, Case{{1, 3, 4}, {0}}, Case{{1}, {0, 1, 2}}}) {
    Tensor s = ops::sum_to(x, c.target);
    REQUIRE(s.shape() == c.target);
    test::require_close(s, ref_sum(x, dims_mask(c.dims, 3)), 1e-12, 1e-12);
  }
  REQUIRE(ops::sum_to(x, {2, 3, 4}).same_as(x));  // nothing to sum: the input itself
}

TEST_CASE("sum_to over size-1 dims of the input keeps the values", "[reduce][sum_to]") {
  Tensor x = test::random({1, 3, 1}, 32);
  test::require_close(ops::sum_to(x, {3, 1}), x.to_vector(), 0, 0);
}

TEST_CASE("sum_to rejects shapes that do not broadcast to the input", "[reduce][sum_to][errors]") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(ops::sum_to(x, {4}), Catch::Contains("sum_to: shape [4] does not broadcast to the input shape [2, 3]"));
  REQUIRE_THROWS_WITH(ops::sum_to(x, {2, 1, 3}), Catch::Contains("sum_to: shape [2, 1, 3] does not broadcast"));
  REQUIRE_THROWS_WITH(ops::sum_to(x, {2, 2}), Catch::Contains("does not broadcast"));
  REQUIRE_THROWS_WITH(ops::sum_to(zeros({2}, DType::i64), {1}), Catch::Contains("sum_to: expected a floating-point tensor"));
}

// ================================================================================================
// softmax and log_softmax
// ================================================================================================

TEST_CASE("softmax and log_softmax on every dim match an f64 loop", "[softmax]") {
  const int64_t dim = GENERATE(0, 1, 2, -1);
  const Layout layout = GENERATE(contiguous_layout, strided_layout, transposed_layout, expanded_layout);
  const DType dtype = GENERATE(DType::f32, DType::f64);
  Tensor x = with_layout(test::random({3, 4, 5}, 41, dtype, 3.0), layout);
  const int64_t d = dim < 0 ? dim + 3 : dim;
  const double tol = dtype == DType::f32 ? 1e-6 : 1e-14;

  Tensor y = softmax(x, dim);
  REQUIRE(y.shape() == x.shape());
  REQUIRE(y.dtype() == dtype);
  test::require_close(y, ref_softmax(x, d, false), tol, tol);
  // Every line along dim sums to 1.
  test::require_close(sum(y.to(DType::f64), {dim}), std::vector<double>(size_t(60 / x.shape()[size_t(d)]), 1.0), 1e-6, 0);
  test::require_close(log_softmax(x, dim), ref_softmax(x, d, true), tol * 10, tol);
}

TEST_CASE("softmax is stable for inputs whose exp would overflow", "[softmax]") {
  const DType dtype = GENERATE(DType::f32, DType::f64);
  Tensor x = tensor({{1000, 1001, 1002}, {-1000, -1000, -1000}}, dtype);
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), total = 1 + e1 + e2;
  test::require_close(softmax(x, 1), {e2 / total, e1 / total, 1 / total, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-6, 1e-6);
  const double lse = std::log(total);
  test::require_close(log_softmax(x, 1), {-2 - lse, -1 - lse, -lse, -std::log(3.0), -std::log(3.0), -std::log(3.0)},
                      1e-5, 1e-6);
  Tensor far = tensor({0, -1000}, dtype);  // exp(-1000) underflows to 0; log_softmax must not be -inf
  test::require_close(log_softmax(far, 0), {0, -1000}, 1e-9, 1e-9);
}

TEST_CASE("softmax of bf16/f16 equals the f32 result rounded to the dtype", "[softmax]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  Tensor x = test::random({3, 7}, 42, dtype);
  Tensor y = softmax(x, -1);
  REQUIRE(y.dtype() == dtype);
  // The f32 computation, rounded: within one rounding of the exact value.
  const std::vector<double> exact = ref_softmax(x, 1, false);
  const double ulp = dtype == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
  test::require_close(y, exact, 0, ulp);
  test::require_equal(y, ops::to_dtype(ops::softmax(ops::to_dtype(x, DType::f32), -1), dtype));
}

TEST_CASE("softmax of a scalar is 1", "[softmax]") {
  REQUIRE(softmax(scalar(3.0, DType::f64), 0).item() == 1.0);
  REQUIRE(log_softmax(scalar(3.0, DType::f64), -1).item() == 0.0);
}

TEST_CASE("softmax and log_softmax gradients on every dim", "[softmax][grad]") {
  const int64_t dim = GENERATE(0, 1, -1);
  Tensor x = test::leaf(test::random({2, 3, 4}, 43));
  require_gradcheck([&](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {x});
  require_gradcheck([&](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {x});
  Tensor xs = strided_leaf(test::random({2, 3, 4}, 44));
  require_gradcheck([&](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {xs});
  require_gradcheck([&](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {xs});
}

TEST_CASE("softmax backward kernels accept non-contiguous gradients", "[softmax]") {
  Tensor x = test::random({4, 3}, 45);
  Tensor gy = test::random({4, 3}, 46);
  Tensor y = ops::softmax(x, 1);
  // grad_x = y * (g - sum(g * y)) along the line, written out.
  std::vector<double> yv = y.to_vector(), g = gy.to_vector(), expected(12);
  for (int64_t r = 0; r < 4; ++r) {
    double dot = 0;
    for (int64_t c = 0; c < 3; ++c) dot += g[size_t(r * 3 + c)] * yv[size_t(r * 3 + c)];
    for (int64_t c = 0; c < 3; ++c) expected[size_t(r * 3 + c)] = yv[size_t(r * 3 + c)] * (g[size_t(r * 3 + c)] - dot);
  }
  test::require_close(ops::softmax_backward(test::transposed(gy), y, 1), expected, 1e-14, 1e-12);
  Tensor ly = ops::log_softmax(x, 1);
  std::vector<double> lv = ly.to_vector();
  for (int64_t r = 0; r < 4; ++r) {
    double total = 0;
    for (int64_t c = 0; c < 3; ++c) total += g[size_t(r * 3 + c)];
    for (int64_t c = 0; c < 3; ++c) expected[size_t(r * 3 + c)] = g[size_t(r * 3 + c)] - std::exp(lv[size_t(r * 3 + c)]) * total;
  }
  test::require_close(ops::log_softmax_backward(test::strided(gy), ly, 1), expected, 1e-14, 1e-12);
}

TEST_CASE("softmax rejects bad arguments", "[softmax][errors]") {
  REQUIRE_THROWS_WITH(softmax(zeros({2, 3}), 2), Catch::Contains("softmax: dim 2 is out of range"));
  REQUIRE_THROWS_WITH(log_softmax(zeros({2, 3}, DType::i64), 0),
                      Catch::Contains("log_softmax: expected a floating-point tensor, got i64"));
  REQUIRE_THROWS_WITH(ops::softmax_backward(zeros({2, 3}), zeros({3, 2}), 1),
                      Catch::Contains("softmax_backward: grad shape [2, 3] differs from output shape [3, 2]"));
  REQUIRE_THROWS_WITH(ops::log_softmax_backward(zeros({2}), zeros({2}), 1),
                      Catch::Contains("log_softmax_backward: dim 1 is out of range"));
}

// ================================================================================================
// concat, stack, split
// ================================================================================================

TEST_CASE("concat of small matrices, computed by hand", "[join]") {
  Tensor a = tensor({{1, 2}}, DType::f64);
  Tensor b = tensor({{3, 4}, {5, 6}}, DType::f64);
  Tensor rows = concat({a, b}, 0);
  REQUIRE(rows.shape() == Shape{3, 2});
  test::require_close(rows, {1, 2, 3, 4, 5, 6});
  Tensor c = from_vector(std::vector<double>{7, 8}, {2, 1}, DType::f64);
  Tensor cols = concat({b, c, b}, -1);
  REQUIRE(cols.shape() == Shape{2, 5});
  test::require_close(cols, {3, 4, 7, 3, 4, 5, 6, 8, 5, 6});
}

TEST_CASE("concat along each dim matches an index loop, with mixed layouts", "[join]") {
  const int64_t dim = GENERATE(0, 1, 2);
  const DType dtype = GENERATE(DType::f32, DType::bf16, DType::i64);
  std::vector<Tensor> xs;
  const std::vector<int64_t> sizes = {2, 1, 3, 0};
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape s = {3, 4, 5};
    s[size_t(dim)] = sizes[i];
    Tensor t = ops::to_dtype(ops::scale_shift(test::random(s, 50 + i), 4, 0), dtype);
    xs.push_back(i == 0 ? test::strided(t) : i == 2 ? test::transposed(t) : t);
  }
  Tensor out = concat(xs, dim);
  Shape shape = {3, 4, 5};
  shape[size_t(dim)] = 6;
  REQUIRE(out.shape() == shape);
  REQUIRE(out.dtype() == dtype);
  // Element idx of the result comes from the input whose range along dim holds idx[dim].
  std::vector<double> expected(size_t(shape_numel(shape)));
  for (int64_t flat = 0; flat < shape_numel(shape); ++flat) {
    std::vector<int64_t> idx = unravel(flat, shape);
    size_t which = 0;
    while (idx[size_t(dim)] >= xs[which].shape()[size_t(dim)]) idx[size_t(dim)] -= xs[which++].shape()[size_t(dim)];
    expected[size_t(flat)] = xs[which].at(idx);
  }
  REQUIRE(out.to_vector() == expected);
}

TEST_CASE("stack adds a dim; split returns views", "[join]") {
  Tensor a = tensor({1, 2, 3}, DType::f64), b = tensor({4, 5, 6}, DType::f64);
  Tensor s0 = stack({a, b}, 0);
  REQUIRE(s0.shape() == Shape{2, 3});
  test::require_close(s0, {1, 2, 3, 4, 5, 6});
  Tensor s1 = stack({a, b}, -1);
  REQUIRE(s1.shape() == Shape{3, 2});
  test::require_close(s1, {1, 4, 2, 5, 3, 6});

  Tensor x = arange(0, 14, 1, DType::f64).view({2, 7});
  std::vector<Tensor> chunks = split(x, 3, 1);
  REQUIRE(chunks.size() == 3);
  REQUIRE(chunks[0].shape() == Shape{2, 3});
  REQUIRE(chunks[2].shape() == Shape{2, 1});
  test::require_close(chunks[1], {3, 4, 5, 10, 11, 12});
  test::require_close(chunks[2], {6, 13});
  REQUIRE(chunks[1].storage().same_as(x.storage()));  // a view, not a copy
  std::vector<Tensor> parts = split(x, {1, 1}, 0);
  test::require_close(parts[1], {7, 8, 9, 10, 11, 12, 13});
  std::vector<Tensor> uneven = split(x, {0, 5, 2}, -1);
  REQUIRE(uneven[0].shape() == Shape{2, 0});
  test::require_close(uneven[2], {5, 6, 12, 13});
  REQUIRE(split(zeros({0, 2}), 4, 0).size() == 1);  // an empty dim is one empty piece
}

TEST_CASE("concat, stack and split gradients", "[join][grad]") {
  Tensor a = test::leaf(test::random({2, 3}, 61));
  Tensor b = test::leaf(test::random({2, 1}, 62));
  Tensor c = strided_leaf(test::random({2, 2}, 63));
  require_gradcheck([](const std::vector<Tensor>& in) { return concat({in[0], in[1], in[2]}, 1); }, {a, b, c});
  require_gradcheck([](const std::vector<Tensor>& in) { return concat({in[0] * in[0], in[0]}, 0); }, {a});
  Tensor d = test::leaf(test::random({2, 3}, 64));
  require_gradcheck([](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, 1); }, {a, d});
  // Split, then reassemble in another order with different weights per piece.
  Tensor x = test::leaf(test::random({3, 7}, 65));
  require_gradcheck(
      [](const std::vector<Tensor>& in) {
        std::vector<Tensor> p = split(in[0], {2, 4, 1}, 1);
        return concat({p[2], p[0] * 3.0, exp(p[1])}, 1);
      },
      {x});
}

TEST_CASE("a gradient reaches only the inputs that need it, and unused split pieces get zeros", "[join][grad]") {
  Tensor a = test::leaf(test::random({2}, 66));
  Tensor frozen = test::random({3}, 67);  // requires no grad
  Tensor x = test::leaf(test::random({5}, 68));
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = sum(concat({a, frozen}, 0) * 2.0) + sum(split(x, 2, 0)[1]);
  }
  tape.backward(loss);
  test::require_close(a.grad(), {2, 2});
  REQUIRE(!frozen.grad().defined());
  test::require_close(x.grad(), {0, 0, 1, 1, 0});
}

TEST_CASE("concat, stack and split reject bad arguments", "[join][errors]") {
  Tensor a = zeros({2, 3});
  REQUIRE_THROWS_WITH(concat({}, 0), Catch::Contains("concat: expected at least one tensor"));
  REQUIRE_THROWS_WITH(concat({a, a, zeros({2, 3}, DType::f64)}, 0),
                      Catch::Contains("concat: tensor 2 has dtype f64 but tensor 0 has f32"));
  REQUIRE_THROWS_WITH(concat({a, zeros({3, 3})}, 1),
                      Catch::Contains("concat: tensor 1 has shape [3, 3] but tensor 0 has shape [2, 3]; shapes must "
                                      "match except in dim 1"));
  REQUIRE_THROWS_WITH(concat({a, zeros({2, 3, 1})}, 0), Catch::Contains("concat: tensor 1 has shape [2, 3, 1]"));
  REQUIRE_THROWS_WITH(concat({a, a}, 2), Catch::Contains("concat: dim 2 is out of range"));
  REQUIRE_THROWS_WITH(concat({a, Tensor()}, 0), Catch::Contains("concat: tensor 1 is an undefined tensor"));
  REQUIRE_THROWS_WITH(concat({scalar(1.0), scalar(2.0)}, 0), Catch::Contains("concat: tensor 0 is 0-dimensional"));
  REQUIRE_THROWS_WITH(stack({a, zeros({3, 2})}, 0),
                      Catch::Contains("stack: tensor 1 has shape [3, 2] but tensor 0 has shape [2, 3]"));
  REQUIRE_THROWS_WITH(stack({a}, 3), Catch::Contains("stack: dim 3 is out of range"));
  REQUIRE_THROWS_WITH(stack({}, 0), Catch::Contains("stack: expected at least one tensor"));
  REQUIRE_THROWS_WITH(split(a, {1, 1}, 1), Catch::Contains("split: sizes [1, 1] add up to 2 but dim 1 of shape [2, 3] has size 3"));
  REQUIRE_THROWS_WITH(split(a, {-1, 4}, 1), Catch::Contains("split: negative size -1"));
  REQUIRE_THROWS_WITH(split(a, 0, 1), Catch::Contains("split: chunk size must be positive, got 0"));
  REQUIRE_THROWS_WITH(split(a, 2, 5), Catch::Contains("split: dim 5 is out of range"));
  REQUIRE_THROWS_WITH(split(scalar(1.0), 1, 0), Catch::Contains("split: expected a tensor with at least one dimension"));
}
