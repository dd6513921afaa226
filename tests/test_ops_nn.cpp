// Tests for the neural-network ops: matmul, layer_norm / rms_norm, embedding, cross_entropy and
// dropout. Every forward is checked against plain f64 loops written here (never against the op
// under test), every gradient with gradcheck, and the split backward (input grads, then weight
// grads) against the whole backward.
#include <cmath>
#include <functional>

#include "kernels/cpu/matmul.h"
#include "test_util.h"

using namespace brigade;
using test::require_gradcheck;
using test::leaf;
using test::random;
using test::require_close;

namespace {


// Gradients of `inputs` (leaves) from one recorded call of f, with upstream gradient `grad_out`:
// either one whole backward, or backward_input for inputs[0] followed by backward_weight.
std::vector<std::vector<double>> tape_grads(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                            const std::vector<Tensor>& inputs, const Tensor& grad_out, bool split) {
  for (Tensor x : inputs) x.zero_grad();
  Tape tape;
  const Tensor y = tape.record([&] { return f(inputs); });
  std::vector<std::vector<double>> grads(inputs.size());
  if (split) {
    tape.backward_input({y}, {grad_out}, {inputs[0]});
    REQUIRE(inputs[0].grad().defined());
    for (size_t i = 1; i < inputs.size(); ++i) REQUIRE_FALSE(inputs[i].grad().defined());  // not yet
    grads[0] = inputs[0].grad().to_vector();
    tape.backward_weight();
    REQUIRE(inputs[0].grad().to_vector() == grads[0]);  // phase 2 leaves the input's gradient alone
  } else {
    tape.backward({y}, {grad_out});
    grads[0] = inputs[0].grad().to_vector();
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    REQUIRE(inputs[i].grad().defined());
    grads[i] = inputs[i].grad().to_vector();
  }
  return grads;
}

void require_split_matches_whole(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                 const std::vector<Tensor>& inputs, const Tensor& grad_out) {
  auto whole = tape_grads(f, inputs, grad_out, false);
  auto split = tape_grads(f, inputs, grad_out, true);
  REQUIRE(whole == split);  // same kernels, same order: bitwise equal
}

// ---- f64 references ----

// C[m, n] = A[m, k] @ B[k, n] on row-major values.
std::vector<double> ref_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k,
                               int64_t n) {
  std::vector<double> c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[size_t(i * k + p)] * b[size_t(p * n + j)];
      c[size_t(i * n + j)] = s;
    }
  return c;
}

// Batched reference for 3-D/4-D operands with NumPy batch broadcasting, via element access.
std::vector<double> ref_batched_matmul(const Tensor& a, const Tensor& b, const Shape& out_shape) {
  const int64_t nd = int64_t(out_shape.size());
  const int64_t m = out_shape[size_t(nd - 2)], n = out_shape[size_t(nd - 1)], k = a.size(-1);
  std::vector<double> out;
  std::vector<int64_t> idx(size_t(nd), 0);
  auto operand_index = [&](const Tensor& t, int64_t r, int64_t c) {
    std::vector<int64_t> ti(size_t(t.dim()));
    for (int64_t d = 0; d < t.dim() - 2; ++d) {
      int64_t od = nd - t.dim() + d;
      ti[size_t(d)] = t.size(d) == 1 ? 0 : idx[size_t(od)];
    }
    ti[size_t(t.dim() - 2)] = r;
    ti[size_t(t.dim() - 1)] = c;
    return ti;
  };
  const int64_t total = shape_numel(out_shape);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[size_t(d)] = rest % out_shape[size_t(d)];
      rest /= out_shape[size_t(d)];
    }
    const int64_t i = idx[size_t(nd - 2)], j = idx[size_t(nd - 1)];
    double s = 0;
    for (int64_t p = 0; p < k; ++p) s += a.at(operand_index(a, i, p)) * b.at(operand_index(b, p, j));
    out.push_back(s);
  }
  (void)m;
  (void)n;
  return out;
}

struct NormRef {
  std::vector<double> y, mean, rstd;
};

// Normalises each row of [rows, d]; `centred` false gives rms_norm. Empty weight/bias = none.
NormRef ref_norm(const std::vector<double>& x, int64_t d, const std::vector<double>& w, const std::vector<double>& b,
                 double eps, bool centred) {
  NormRef r;
  const int64_t rows = int64_t(x.size()) / d;
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    if (centred) {
      for (int64_t j = 0; j < d; ++j) mean += x[size_t(i * d + j)];
      mean /= double(d);
    }
    for (int64_t j = 0; j < d; ++j) var += (x[size_t(i * d + j)] - mean) * (x[size_t(i * d + j)] - mean);
    const double rstd = 1.0 / std::sqrt(var / double(d) + eps);
    for (int64_t j = 0; j < d; ++j) {
      double v = (x[size_t(i * d + j)] - mean) * rstd;
      if (!w.empty()) v *= w[size_t(j)];
      if (!b.empty()) v += b[size_t(j)];
      r.y.push_back(v);
    }
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
  }
  return r;
}

}  // namespace

// =====================================================================================================
// matmul
// =====================================================================================================

TEST_CASE("matmul: hand-computed 2x3 @ 3x2", "[matmul]") {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor b = tensor({{7, 8}, {9, 10}, {11, 12}});
  Tensor c = ops::matmul(a, b);
  REQUIRE(c.shape() == Shape{2, 2});
  REQUIRE(c.dtype() == DType::f32);
  require_close(c, {58, 64, 139, 154}, 0, 0);
}

TEST_CASE("matmul: random sizes vs f64 loops and the naive kernel, all layouts", "[matmul]") {
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const int64_t m = GENERATE(1, 7, 33, 130);
  const int64_t k = GENERATE(1, 65, 300);  // 300 > one K block
  const int64_t n = GENERATE(1, 17, 130);
  const int layout = GENERATE(0, 1, 2);  // contiguous, transposed, strided
  CAPTURE(dtype_name(dtype), m, k, n, layout);

  const Tensor a0 = random({m, k}, 10 + uint64_t(m * k), dtype);
  const Tensor b0 = random({k, n}, 20 + uint64_t(k * n), dtype);
  // (A matrix with one column is contiguous whatever its stride, so it can't be made strided.)
  auto relayout = [layout](const Tensor& t) {
    return layout == 1 ? test::transposed(t) : layout == 2 && t.size(-1) > 1 ? test::strided(t) : t;
  };
  const Tensor a = relayout(a0), b = relayout(b0);

  const Tensor c = ops::matmul(a, b);
  REQUIRE(c.shape() == Shape{m, n});
  REQUIRE(c.dtype() == dtype);
  const double tol = dtype == DType::f32 ? 2e-5 * std::sqrt(double(k)) : 1e-12 * double(k);
  require_close(c, ref_matmul(a0.to_vector(), b0.to_vector(), m, k, n), tol, 1e-5);

  // The fast kernel against the naive one, on the same strided views.
  Tensor naive = empty({m, n}, dtype);
  cpu::matmul_naive(naive, a, b);
  require_close(c, naive, tol, 1e-5);
}

TEST_CASE("matmul: raw gemm on strided matrices, overwrite and accumulate", "[matmul]") {
  // c (3 x 5, every other column of a wider buffer) = a^T @ b, then += a^T @ b again.
  const int64_t m = 3, k = 300, n = 5;
  std::vector<double> a(size_t(k * m)), b(size_t(k * n)), c(size_t(m * 2 * n), -1.0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(double(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(double(i));
  const cpu::MatrixView<const double> a_stored{a.data(), k, m, m, 1};
  const cpu::MatrixView<const double> bv{b.data(), k, n, n, 1};
  const cpu::MatrixView<double> cv{c.data(), m, n, 2 * n, 2};
  cpu::gemm(cv, a_stored.transposed(), bv);
  for (int pass = 1; pass <= 2; ++pass) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[size_t(p * m + i)] * b[size_t(p * n + j)];
        REQUIRE(cv(i, j) == Approx(pass * s).margin(1e-12));
        REQUIRE(c[size_t(i * 2 * n + 2 * j + 1)] == -1.0);  // the gaps are untouched
      }
    cpu::gemm(cv, a_stored.transposed(), bv, /*accumulate=*/true);
  }
}

TEST_CASE("matmul: results do not depend on the thread count", "[matmul]") {
  // The thread count changes how C is cut into tiles (and who computes which), never the order in
  // which an element sums its products: results must be bitwise equal.
  const Tensor a = random({256, 300}, 1, DType::f32), b = random({300, 67}, 2, DType::f32);
  const int saved = num_threads();
  set_num_threads(1);
  const Tensor one = ops::matmul(a, b);
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    const Tensor many = ops::matmul(a, b);
    test::require_equal(one, many);
  }
  set_num_threads(saved);
}

TEST_CASE("matmul: batched with broadcast batch dims", "[matmul]") {
  SECTION("[2, 1, 3, 4] @ [3, 4, 5]") {
    const Tensor a = random({2, 1, 3, 4}, 3), b = random({3, 4, 5}, 4);
    const Tensor c = ops::matmul(a, b);
    REQUIRE(c.shape() == Shape{2, 3, 3, 5});
    require_close(c, ref_batched_matmul(a, b, {2, 3, 3, 5}), 1e-12, 1e-12);
  }
  SECTION("[4, 3, 5] @ [5, 2] (shared right operand), transposed left") {
    const Tensor a = test::transposed(random({4, 3, 5}, 5)), b = random({5, 2}, 6);
    const Tensor c = ops::matmul(a, b);
    REQUIRE(c.shape() == Shape{4, 3, 2});
    require_close(c, ref_batched_matmul(a, b, {4, 3, 2}), 1e-12, 1e-12);
  }
  SECTION("expanded (stride-0) batch dim and strided right operand, f32") {
    const Tensor a = random({1, 6, 7}, 7, DType::f32).expand({3, 6, 7});
    const Tensor b = test::strided(random({3, 7, 9}, 8, DType::f32));
    const Tensor c = ops::matmul(a, b);
    REQUIRE(c.shape() == Shape{3, 6, 9});
    require_close(c, ref_batched_matmul(a, b, {3, 6, 9}), 1e-5, 1e-5);
  }
}

TEST_CASE("matmul: 1-D operands follow NumPy", "[matmul]") {
  const Tensor v = tensor({1, 2, 3}, DType::f64);
  const Tensor m = tensor({{1, 0}, {0, 1}, {1, 1}}, DType::f64);  // [3, 2]
  SECTION("vector @ matrix -> [n]") {
    const Tensor c = ops::matmul(v, m);
    REQUIRE(c.shape() == Shape{2});
    require_close(c, {4, 5}, 0, 0);
  }
  SECTION("matrix @ vector -> [m]") {
    const Tensor c = ops::matmul(m.transpose(0, 1), v);  // [2, 3] @ [3]
    REQUIRE(c.shape() == Shape{2});
    require_close(c, {4, 5}, 0, 0);
  }
  SECTION("vector @ vector -> scalar") {
    const Tensor c = ops::matmul(v, v);
    REQUIRE(c.shape() == Shape{});
    require_close(c, {14}, 0, 0);
  }
  SECTION("vector @ batched matrix -> [batch, n]") {
    const Tensor b = random({2, 3, 4}, 9);
    const Tensor c = ops::matmul(v, b);
    REQUIRE(c.shape() == Shape{2, 4});
    std::vector<double> expected;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j)
        expected.push_back(1 * b.at({i, 0, j}) + 2 * b.at({i, 1, j}) + 3 * b.at({i, 2, j}));
    require_close(c, expected, 1e-12, 1e-12);
  }
}

TEST_CASE("matmul: empty dims", "[matmul]") {
  const Tensor c = ops::matmul(zeros({3, 0}), zeros({0, 4}));
  REQUIRE(c.shape() == Shape{3, 4});
  require_close(c, std::vector<double>(12, 0.0), 0, 0);
  REQUIRE(ops::matmul(zeros({0, 5}), zeros({5, 4})).shape() == Shape{0, 4});
}

TEST_CASE("matmul: bf16 and f16 inputs compute in f32 and round back", "[matmul]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  const Tensor a = random({5, 40}, 11, dtype), b = random({40, 3}, 12, dtype);
  const Tensor c = ops::matmul(a, b);
  REQUIRE(c.dtype() == dtype);
  // Reference from the (already rounded) inputs; the only extra error is rounding the output.
  const double rel = dtype == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
  require_close(c, ref_matmul(a.to_vector(), b.to_vector(), 5, 40, 3), 1e-3, rel);
}

TEST_CASE("matmul: gradients", "[matmul][grad]") {
  SECTION("2-D") {
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({3, 4}, 1)), leaf(random({4, 5}, 2))});
  }
  SECTION("transposed views of both operands") {
    Tensor a = leaf(random({4, 3}, 3)), b = leaf(random({5, 4}, 4));
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0].transpose(0, 1), x[1].transpose(0, 1)); },
                      {a, b});
  }
  SECTION("batched with broadcast batch dims") {
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({2, 1, 3, 4}, 5)), leaf(random({3, 4, 2}, 6))});
  }
  SECTION("batched left operand, shared 2-D right operand (weight)") {
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({2, 3, 4}, 7)), leaf(random({4, 5}, 8))});
  }
  SECTION("shared 2-D left operand, batched right operand") {
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({3, 4}, 9)), leaf(random({2, 4, 5}, 10))});
  }
  SECTION("1-D operands") {
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({4}, 11)), leaf(random({2, 4, 3}, 12))});
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({3, 4}, 13)), leaf(random({4}, 14))});
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({4}, 15)), leaf(random({4}, 16))});
    require_gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                      {leaf(random({2, 3, 4}, 17)), leaf(random({4}, 18))});
  }
}

TEST_CASE("matmul: backward values are dC @ B^T and A^T @ dC", "[matmul][grad]") {
  Tensor a = leaf(tensor({{1, 2}, {3, 4}}, DType::f64)), b = leaf(tensor({{5, 6}, {7, 8}}, DType::f64));
  Tape tape;
  const Tensor c = tape.record([&] { return matmul(a, b); });
  tape.backward({c}, {tensor({{1, 0}, {0, 2}}, DType::f64)});
  require_close(a.grad(), {5, 7, 12, 16}, 0, 0);  // [[1,0],[0,2]] @ [[5,7],[6,8]]
  require_close(b.grad(), {1, 6, 2, 8}, 0, 0);    // [[1,3],[2,4]] @ [[1,0],[0,2]]
}

TEST_CASE("matmul: split backward equals the whole backward", "[matmul][grad]") {
  const Tensor x = leaf(random({2, 3, 4}, 21)), w = leaf(random({4, 5}, 22));
  require_split_matches_whole([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {x, w},
                              random({2, 3, 5}, 23));
}

TEST_CASE("matmul: bad inputs", "[matmul][errors]") {
  REQUIRE_THROWS_WITH(ops::matmul(zeros({2, 3}), zeros({4, 5})),
                      Catch::Contains("matmul: shapes [2, 3] and [4, 5] cannot be multiplied"));
  REQUIRE_THROWS_WITH(ops::matmul(zeros({3}), zeros({4})), Catch::Contains("shapes [3] and [4] cannot be multiplied"));
  REQUIRE_THROWS_WITH(ops::matmul(zeros({2, 3}), zeros({3, 4}, DType::f64)),
                      Catch::Contains("matmul: dtypes differ: f32 and f64"));
  REQUIRE_THROWS_WITH(ops::matmul(zeros({2, 2, 3}), zeros({3, 3, 4})),
                      Catch::Contains("matmul: batch dims of shapes [2, 2, 3] and [3, 3, 4] cannot be broadcast"));
  REQUIRE_THROWS_WITH(ops::matmul(zeros({2, 3}, DType::i32), zeros({3, 2}, DType::i32)),
                      Catch::Contains("matmul: expected a floating-point tensor, got i32"));
  REQUIRE_THROWS_WITH(ops::matmul(scalar(1), zeros({3})), Catch::Contains("matmul: both operands need at least one dim"));
  REQUIRE_THROWS_WITH(matmul(zeros({2, 3}), zeros({4, 5})),
                      Catch::Contains("matmul: shapes [2, 3] and [4, 5] cannot be multiplied"));
}

// =====================================================================================================
// layer_norm / rms_norm
// =====================================================================================================

TEST_CASE("layer_norm: hand-computed row", "[norm]") {
  // x = [1, 2, 3]: mean 2, variance 2/3, so y = (x - 2) / sqrt(2/3 + eps).
  const ops::NormOutput out = ops::layer_norm(tensor({{1, 2, 3}}, DType::f64), Tensor(), Tensor(), 0.0);
  const double s = 1.0 / std::sqrt(2.0 / 3.0);
  require_close(out.y, {-s, 0, s}, 1e-12, 1e-12);
  REQUIRE(out.mean.dtype() == DType::f64);  // statistics keep the compute dtype
  REQUIRE(out.rstd.dtype() == DType::f64);
  require_close(out.mean, {2}, 1e-12, 1e-12);
  require_close(out.rstd, {s}, 1e-12, 1e-12);
}

TEST_CASE("rms_norm: hand-computed row", "[norm]") {
  // x = [3, 4]: mean(x^2) = 12.5; with weight [1, 2]: y = [3, 8] / sqrt(12.5).
  const ops::NormOutput out = ops::rms_norm(tensor({3, 4}, DType::f64), tensor({1, 2}, DType::f64), 0.0);
  const double r = 1.0 / std::sqrt(12.5);
  require_close(out.y, {3 * r, 8 * r}, 1e-12, 1e-12);
  REQUIRE_FALSE(out.mean.defined());
  require_close(out.rstd, {r}, 1e-6, 1e-6);
}

TEST_CASE("layer_norm and rms_norm: random inputs vs f64 loops, all layouts", "[norm]") {
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const int layout = GENERATE(0, 1, 2);  // contiguous, strided, transposed
  const bool affine = GENERATE(true, false);
  CAPTURE(dtype_name(dtype), layout, affine);
  const int64_t d = 37;
  const Tensor x0 = random({4, 5, d}, 31, dtype, 3.0);
  const Tensor x = layout == 1 ? test::strided(x0) : layout == 2 ? test::transposed(x0) : x0;
  const Tensor w = affine ? random({d}, 32, dtype) : Tensor(), b = affine ? random({d}, 33, dtype) : Tensor();
  const std::vector<double> wv = affine ? w.to_vector() : std::vector<double>{};
  const std::vector<double> bv = affine ? b.to_vector() : std::vector<double>{};
  const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;

  const ops::NormOutput ln = ops::layer_norm(x, w, b, 1e-5);
  const NormRef ln_ref = ref_norm(x0.to_vector(), d, wv, bv, 1e-5, true);
  REQUIRE(ln.y.shape() == x.shape());
  REQUIRE(ln.y.dtype() == dtype);
  require_close(ln.y, ln_ref.y, tol, tol);
  require_close(ln.mean, ln_ref.mean, 1e-6, 1e-6);
  require_close(ln.rstd, ln_ref.rstd, 1e-6, 1e-6);

  const ops::NormOutput rms = ops::rms_norm(x, w, 1e-6);
  const NormRef rms_ref = ref_norm(x0.to_vector(), d, wv, {}, 1e-6, false);
  require_close(rms.y, rms_ref.y, tol, tol);
  require_close(rms.rstd, rms_ref.rstd, 1e-6, 1e-6);
}

TEST_CASE("layer_norm: bf16 and f16 inputs", "[norm]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  const Tensor x = random({3, 16}, 34, dtype), w = random({16}, 35, dtype), b = random({16}, 36, dtype);
  const ops::NormOutput out = ops::layer_norm(x, w, b, 1e-5);
  REQUIRE(out.y.dtype() == dtype);
  REQUIRE(out.rstd.dtype() == DType::f32);
  const NormRef ref = ref_norm(x.to_vector(), 16, w.to_vector(), b.to_vector(), 1e-5, true);
  require_close(out.y, ref.y, 2e-2, dtype == DType::bf16 ? 1.0 / 128 : 1.0 / 1024);
}

TEST_CASE("layer_norm and rms_norm: gradients", "[norm][grad]") {
  SECTION("layer_norm x, weight, bias") {
    require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
                      {leaf(random({3, 6}, 41)), leaf(random({6}, 42)), leaf(random({6}, 43))});
  }
  SECTION("layer_norm without affine, non-contiguous x") {
    Tensor x = leaf(random({5, 4}, 44));
    require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0].transpose(0, 1), Tensor(), Tensor()); },
                      {x});
  }
  SECTION("layer_norm with weight only") {
    require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor()); },
                      {leaf(random({2, 3, 5}, 45)), leaf(random({5}, 46))});
  }
  SECTION("rms_norm x, weight") {
    require_gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-6); },
                      {leaf(random({3, 6}, 47)), leaf(random({6}, 48))});
  }
  SECTION("rms_norm without weight") {
    require_gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], Tensor()); }, {leaf(random({4, 3}, 49))});
  }
}

TEST_CASE("layer_norm and rms_norm: parameter gradients vs f64 loops", "[norm][grad]") {
  // grad_weight = sum_rows g * x_hat, grad_bias = sum_rows g, from the saved statistics.
  const Tensor x = random({7, 5}, 51), g = random({7, 5}, 52), w = random({5}, 53), b = random({5}, 54);
  const ops::NormOutput saved = ops::layer_norm(x, w, b, 1e-5);
  auto [gw, gb] = ops::layer_norm_backward_params(g, x, w, b, saved);
  const NormRef ref = ref_norm(x.to_vector(), 5, {}, {}, 1e-5, true);  // y = x_hat
  const std::vector<double> gv = g.to_vector();
  std::vector<double> ew(5, 0.0), eb(5, 0.0), erms(5, 0.0);
  const NormRef rms_ref = ref_norm(x.to_vector(), 5, {}, {}, 1e-5, false);
  for (size_t i = 0; i < gv.size(); ++i) {
    ew[i % 5] += gv[i] * ref.y[i];
    eb[i % 5] += gv[i];
    erms[i % 5] += gv[i] * rms_ref.y[i];
  }
  require_close(gw, ew, 1e-6, 1e-6);  // statistics are saved in f32
  require_close(gb, eb, 1e-12, 1e-12);
  auto [only_w, no_b] = ops::layer_norm_backward_params(g, x, w, Tensor(), saved);
  REQUIRE(only_w.defined());
  REQUIRE_FALSE(no_b.defined());

  const ops::NormOutput rms_saved = ops::rms_norm(x, w, 1e-5);
  require_close(ops::rms_norm_backward_weight(g, x, rms_saved), erms, 1e-6, 1e-6);
}

TEST_CASE("layer_norm and rms_norm: split backward equals the whole backward", "[norm][grad]") {
  const Tensor x = leaf(random({3, 8}, 61)), w = leaf(random({8}, 62)), b = leaf(random({8}, 63));
  const Tensor g = random({3, 8}, 64);
  require_split_matches_whole([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b},
                              g);
  require_split_matches_whole([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1]); }, {x, w}, g);
}

TEST_CASE("layer_norm and rms_norm: bad inputs", "[norm][errors]") {
  REQUIRE_THROWS_WITH(ops::layer_norm(zeros({2, 3}), zeros({4}), Tensor(), 1e-5),
                      Catch::Contains("layer_norm: weight has shape [4] but input [2, 3] needs [3]"));
  REQUIRE_THROWS_WITH(ops::layer_norm(zeros({2, 3}), zeros({3}), zeros({2}), 1e-5),
                      Catch::Contains("layer_norm: bias has shape [2]"));
  REQUIRE_THROWS_WITH(ops::rms_norm(zeros({2, 3}), zeros({3}, DType::f64), 1e-5),
                      Catch::Contains("rms_norm: dtypes differ: f32 and f64"));
  REQUIRE_THROWS_WITH(ops::layer_norm(zeros({2, 3}, DType::i64), Tensor(), Tensor(), 1e-5),
                      Catch::Contains("layer_norm: expected a floating-point tensor, got i64"));
  REQUIRE_THROWS_WITH(ops::layer_norm(scalar(1), Tensor(), Tensor(), 1e-5), Catch::Contains("layer_norm: input must have"));
  const ops::NormOutput saved = ops::layer_norm(zeros({2, 3}), Tensor(), Tensor(), 1e-5);
  REQUIRE_THROWS_WITH(ops::layer_norm_backward_input(zeros({2, 4}), zeros({2, 3}), Tensor(), saved),
                      Catch::Contains("layer_norm_backward_input: grad shape [2, 4] differs from input shape [2, 3]"));
  REQUIRE_THROWS_WITH(ops::layer_norm_backward_input(zeros({3, 3}), zeros({3, 3}), Tensor(), saved),
                      Catch::Contains("saved statistics do not match input shape [3, 3]"));
}

// =====================================================================================================
// embedding
// =====================================================================================================

TEST_CASE("embedding: hand-checked lookup with i32 and i64 indices", "[embedding]") {
  const DType index_dtype = GENERATE(DType::i32, DType::i64);
  const Tensor weight = tensor({{0, 1}, {10, 11}, {20, 21}});
  const Tensor idx = from_vector(std::vector<double>{2, 0, 2, 1}, {2, 2}, index_dtype);
  const Tensor out = ops::embedding(weight, idx);
  REQUIRE(out.shape() == Shape{2, 2, 2});
  require_close(out, {20, 21, 0, 1, 20, 21, 10, 11}, 0, 0);
}

TEST_CASE("embedding: non-contiguous table and indices, half dtypes are exact", "[embedding]") {
  const DType dtype = GENERATE(DType::f32, DType::bf16, DType::f64);
  const Tensor weight = test::transposed(random({6, 4}, 71, dtype));
  const Tensor idx = from_vector(std::vector<double>{5, 0, 3, 3, 1, 2}, {2, 3}, DType::i64).transpose(0, 1);  // [3, 2]
  const Tensor out = ops::embedding(weight, idx);
  REQUIRE(out.shape() == Shape{3, 2, 4});
  REQUIRE(out.dtype() == dtype);
  std::vector<double> expected;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t c = 0; c < 4; ++c) expected.push_back(weight.at({int64_t(idx.at({i, j})), c}));
  require_close(out, expected, 0, 0);
}

TEST_CASE("embedding: backward sums repeated indices", "[embedding][grad]") {
  const Tensor idx = from_vector(std::vector<double>{1, 3, 1, 1, 0}, {5}, DType::i32);
  const Tensor g = random({5, 3}, 72);
  const Tensor gw = ops::embedding_backward(g, idx, 4);
  REQUIRE(gw.shape() == Shape{4, 3});
  std::vector<double> expected(12, 0.0);
  const std::vector<double> gv = g.to_vector(), iv = idx.to_vector();
  for (size_t i = 0; i < 5; ++i)
    for (size_t c = 0; c < 3; ++c) expected[size_t(iv[i]) * 3 + c] += gv[i * 3 + c];
  require_close(gw, expected, 1e-12, 1e-12);  // row 2 is never used: zeros
  require_close(ops::embedding_backward(test::transposed(g), idx, 4), expected, 1e-12, 1e-12);

  SECTION("gradcheck on the weight") {
    require_gradcheck([idx](const std::vector<Tensor>& in) { return embedding(in[0], idx.reshape({5, 1})); },
                      {leaf(random({4, 3}, 73))});
  }
  SECTION("deterministic for any thread count") {
    const Tensor many_idx = from_vector(std::vector<double>(5000, 7.0), {5000}, DType::i64);
    const Tensor many_g = random({5000, 64}, 74, DType::f32);
    const int saved = num_threads();
    set_num_threads(1);
    const Tensor one = ops::embedding_backward(many_g, many_idx, 9);
    set_num_threads(std::max(2, saved));
    const Tensor more = ops::embedding_backward(many_g, many_idx, 9);
    set_num_threads(saved);
    test::require_equal(one, more);
  }
}

TEST_CASE("embedding: bad inputs", "[embedding][errors]") {
  const Tensor weight = zeros({10, 4});
  REQUIRE_THROWS_WITH(ops::embedding(weight, tensor({1, 12}, DType::i64)),
                      Catch::Contains("embedding: index 12 is out of range for a table of 10 rows"));
  REQUIRE_THROWS_WITH(ops::embedding(weight, tensor({-1}, DType::i32)),
                      Catch::Contains("embedding: index -1 is out of range for a table of 10 rows"));
  REQUIRE_THROWS_WITH(ops::embedding(weight, tensor({1.0})), Catch::Contains("embedding: indices must be i32 or i64, got f32"));
  REQUIRE_THROWS_WITH(ops::embedding(zeros({10}), tensor({1}, DType::i64)),
                      Catch::Contains("embedding: weight must be [num_embeddings, dim], got shape [10]"));
  REQUIRE_THROWS_WITH(ops::embedding_backward(zeros({2, 4}), tensor({1, 9}, DType::i64), 5),
                      Catch::Contains("embedding_backward: index 9 is out of range for a table of 5 rows"));
  REQUIRE_THROWS_WITH(ops::embedding_backward(zeros({3, 4}), tensor({1, 2}, DType::i64), 5),
                      Catch::Contains("embedding_backward: grad shape [3, 4] does not match indices shape [2]"));
}

TEST_CASE("index scans: a backward reuses its forward's scan only for the same tensor, unwritten since",
          "[embedding][cross_entropy]") {
  const Tensor weight = random({4, 2}, 75);
  const Tensor idx = tensor({1, 3, 1}, DType::i64);
  ops::CheckedIndices checked;
  ops::embedding(weight, idx, &checked);
  CHECK(checked.counted == 3);
  CHECK(checked.indices.storage().same_as(idx.storage()));  // already contiguous i64: no copy
  CHECK(checked.covers(idx, 4, std::nullopt));
  // Not covered: other bounds, another ignore_index, equal values in another tensor, another view.
  CHECK_FALSE(checked.covers(idx, 5, std::nullopt));
  CHECK_FALSE(checked.covers(idx, 4, -100));
  CHECK_FALSE(checked.covers(tensor({1, 3, 1}, DType::i64), 4, std::nullopt));
  CHECK_FALSE(checked.covers(idx.narrow(0, 0, 2), 4, std::nullopt));
  // Reused or not, the gradient is the same.
  const Tensor g = random({3, 2}, 76);
  test::require_equal(ops::embedding_backward(g, idx, 4, &checked), ops::embedding_backward(g, idx, 4));
  // An i32 tensor is scanned as an i64 copy; the copy stands for it while it is unwritten.
  const Tensor small = tensor({0, 2}, DType::i32);
  ops::CheckedIndices widened;
  ops::embedding(weight, small, &widened);
  CHECK(widened.indices.dtype() == DType::i64);
  CHECK(widened.covers(small, 4, std::nullopt));
  // A write in place (it bumps the storage's version) makes the backward scan again, and catch it.
  ops::fill_(idx, 9);
  CHECK_FALSE(checked.covers(idx, 4, std::nullopt));
  REQUIRE_THROWS_WITH(ops::embedding_backward(g, idx, 4, &checked),
                      Catch::Contains("embedding_backward: index 9 is out of range for a table of 4 rows"));
  // A write through a raw pointer bumps nothing, so the reused check cannot see it; the CPU kernels
  // still refuse to index out of bounds with it.
  const Tensor raw = tensor({0, 1}, DType::i64);
  ops::CheckedIndices stale;
  ops::embedding(weight, raw, &stale);
  raw.data<int64_t>()[1] = 6;
  REQUIRE(stale.covers(raw, 4, std::nullopt));
  REQUIRE_THROWS_WITH(ops::embedding_backward(random({2, 2}, 79), raw, 4, &stale),
                      Catch::Contains("embedding_backward: index 6 at position 1 is out of range for a table of 4 "
                                      "rows (written after it was checked?)"));
  const Tensor logits = random({2, 5}, 80), targets = tensor({0, 1}, DType::i64);
  const ops::CrossEntropyOutput ce = ops::cross_entropy(logits, targets, -100, ops::Reduction::mean);
  targets.data<int64_t>()[0] = 5;
  REQUIRE_THROWS_WITH(ops::cross_entropy_backward(tensor({1.0}, DType::f64), logits, targets, ce, -100,
                                                  ops::Reduction::mean),
                      Catch::Contains("cross_entropy_backward: target 5 at position 0 is out of range for 5 classes "
                                      "(written after it was checked?)"));
}

TEST_CASE("index scans: through autograd, indices written in place between forward and backward are refused",
          "[embedding][cross_entropy]") {
  SECTION("embedding") {
    const Tensor weight = leaf(random({4, 2}, 77));
    const Tensor idx = tensor({1, 3}, DType::i64);
    Tape tape;
    const Tensor loss = tape.record([&] { return sum(embedding(weight, idx)); });
    ops::fill_(idx, 2);  // in range: only the version shows it
    REQUIRE_THROWS_WITH(tape.backward(loss),
                        Catch::Contains("backward of embedding: its indices (shape [2]) were modified in place after "
                                        "embedding used them; clone them before modifying them"));
  }
  SECTION("cross_entropy") {
    const Tensor logits = leaf(random({2, 5}, 78));
    const Tensor targets = tensor({1, 3}, DType::i32);
    Tape tape;
    const Tensor loss = tape.record([&] { return cross_entropy(logits, targets); });
    ops::fill_(targets, 0);
    REQUIRE_THROWS_WITH(tape.backward(loss), Catch::Contains("backward of cross_entropy: its targets (shape [2]) were "
                                                             "modified in place after cross_entropy used them"));
  }
}

// =====================================================================================================
// cross_entropy
// =====================================================================================================

namespace {

// Per-row -log softmax(x)[t] in f64, summed over counted rows; count = rows not ignored.
double ref_cross_entropy(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore, bool mean,
                         std::vector<double>* lse_out = nullptr) {
  const int64_t n = logits.size(0), c = logits.size(1);
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(logits.at({i, j}));
    const double lse = std::log(s);
    if (lse_out) lse_out->push_back(lse);
    if (targets[size_t(i)] == ignore) continue;
    total += lse - logits.at({i, targets[size_t(i)]});
    ++count;
  }
  return mean ? (count ? total / double(count) : 0.0) : total;
}

}  // namespace

TEST_CASE("cross_entropy: hand-computed", "[cross_entropy]") {
  // One row [1, 2, 3] with target 2: loss = log(e + e^2 + e^3) - 3.
  const auto out = ops::cross_entropy(tensor({{1, 2, 3}}, DType::f64), tensor({2}, DType::i64), -100,
                                      ops::Reduction::mean);
  const double expected = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;
  REQUIRE(out.loss.shape() == Shape{});
  require_close(out.loss, {expected}, 1e-12, 1e-12);
  require_close(out.lse, {expected + 3.0}, 1e-6, 1e-6);
  REQUIRE(out.count == 1);
}

TEST_CASE("cross_entropy: random logits with ignore_index vs f64 loops", "[cross_entropy]") {
  const DType dtype = GENERATE(DType::f32, DType::f64);
  const bool mean = GENERATE(true, false);
  const bool transposed = GENERATE(false, true);
  CAPTURE(dtype_name(dtype), mean, transposed);
  const Tensor logits0 = random({9, 13}, 81, dtype, 4.0);
  const Tensor logits = transposed ? test::transposed(logits0) : logits0;
  const std::vector<int64_t> t = {3, -1, 12, 0, 7, -1, 5, 5, 11};
  const Tensor targets = from_vector(t, {9}, DType::i32);
  const auto reduction = mean ? ops::Reduction::mean : ops::Reduction::sum;
  const auto out = ops::cross_entropy(logits, targets, -1, reduction);
  std::vector<double> lse;
  const double expected = ref_cross_entropy(logits0, t, -1, mean, &lse);
  REQUIRE(out.count == 7);
  REQUIRE(out.loss.dtype() == dtype);
  require_close(out.loss, {expected}, 1e-5, dtype == DType::f32 ? 1e-5 : 1e-12);
  require_close(out.lse, lse, 1e-5, 1e-6);

  // Backward: grad_loss * scale * (softmax - onehot), zero on ignored rows.
  const Tensor grad = ops::cross_entropy_backward(scalar(0.5, dtype), logits, targets, out, -1, reduction);
  std::vector<double> expected_grad;
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t j = 0; j < 13; ++j) {
      if (t[size_t(i)] == -1) {
        expected_grad.push_back(0);
        continue;
      }
      const double p = std::exp(logits0.at({i, j}) - lse[size_t(i)]);
      expected_grad.push_back(0.5 * (mean ? 1.0 / 7 : 1.0) * (p - (j == t[size_t(i)] ? 1.0 : 0.0)));
    }
  require_close(grad, expected_grad, 1e-6, 1e-5);
}

TEST_CASE("cross_entropy: every target ignored gives 0 and zero gradient", "[cross_entropy]") {
  Tensor logits = leaf(random({3, 4}, 82));
  Tape tape;
  const Tensor loss = tape.record([&] { return cross_entropy(logits, tensor({-100, -100, -100}, DType::i64)); });
  require_close(loss, std::vector<double>{0}, 0, 0);
  tape.backward(loss);
  require_close(logits.grad(), std::vector<double>(12, 0.0), 0, 0);
}

TEST_CASE("cross_entropy: bf16 logits give an f32 loss, the bits of widening them first", "[cross_entropy]") {
  const Tensor logits = random({4, 6}, 83, DType::bf16);
  const std::vector<int64_t> t = {0, 5, 2, 2};
  const Tensor targets = from_vector(t, {4}, DType::i64);
  const auto out = ops::cross_entropy(logits, targets, -100, ops::Reduction::mean);
  REQUIRE(out.loss.dtype() == DType::f32);  // a bf16 loss would keep 3 significant digits
  require_close(out.loss, {ref_cross_entropy(logits, t, -100, true)}, 1e-5, 1e-5);
  // The same loss and gradient bits as an f32 copy of the logits, the gradient then rounded to bf16.
  const Tensor wide = ops::to_dtype(logits, DType::f32);
  const auto widened = ops::cross_entropy(wide, targets, -100, ops::Reduction::mean);
  REQUIRE(out.loss.to_vector() == widened.loss.to_vector());
  const Tensor g = scalar(0.25, DType::f32);
  const Tensor grad = ops::cross_entropy_backward(g, logits, targets, out, -100, ops::Reduction::mean);
  REQUIRE(grad.dtype() == DType::bf16);
  const Tensor grad_wide = ops::cross_entropy_backward(g, wide, targets, widened, -100, ops::Reduction::mean);
  REQUIRE(grad.to_vector() == ops::to_dtype(grad_wide, DType::bf16).to_vector());
}

TEST_CASE("cross_entropy: gradients", "[cross_entropy][grad]") {
  const Tensor targets = tensor({2, -100, 0, 4}, DType::i64);
  SECTION("mean") {
    require_gradcheck([targets](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets); },
                      {leaf(random({4, 5}, 84))});
  }
  SECTION("sum, non-contiguous logits") {
    require_gradcheck(
        [targets](const std::vector<Tensor>& in) {
          // Qualified: the Reduction argument makes ADL find ops::cross_entropy too.
          return brigade::cross_entropy(in[0].transpose(0, 1), targets, -100, ops::Reduction::sum);
        },
        {leaf(random({5, 4}, 85))});
  }
  SECTION("ignore_index that is also a valid class") {
    require_gradcheck(
        [targets](const std::vector<Tensor>& in) { return cross_entropy(in[0], tensor({2, 0, 0, 4}, DType::i32), 0); },
        {leaf(random({4, 5}, 86))});
  }
}

TEST_CASE("cross_entropy: bad inputs", "[cross_entropy][errors]") {
  REQUIRE_THROWS_WITH(ops::cross_entropy(zeros({2, 5}), tensor({1, 7}, DType::i64), -100, ops::Reduction::mean),
                      Catch::Contains("cross_entropy: target 7 at position 1 is out of range for 5 classes"));
  REQUIRE_THROWS_WITH(ops::cross_entropy(zeros({2, 5}), tensor({-3, 1}, DType::i32), -100, ops::Reduction::mean),
                      Catch::Contains("cross_entropy: target -3 at position 0 is out of range for 5 classes"));
  REQUIRE_THROWS_WITH(ops::cross_entropy(zeros({2, 5}), tensor({1, 2, 3}, DType::i64), -100, ops::Reduction::mean),
                      Catch::Contains("cross_entropy: targets shape [3] does not match logits shape [2, 5]"));
  REQUIRE_THROWS_WITH(ops::cross_entropy(zeros({2, 5}), tensor({1, 2}), -100, ops::Reduction::mean),
                      Catch::Contains("cross_entropy: targets must be i32 or i64, got f32"));
  REQUIRE_THROWS_WITH(ops::cross_entropy(zeros({2, 5, 1}), tensor({1, 2}, DType::i64), -100, ops::Reduction::mean),
                      Catch::Contains("cross_entropy: logits must be [N, C], got shape [2, 5, 1]"));
}

// =====================================================================================================
// dropout
// =====================================================================================================

TEST_CASE("dropout: mask is philox_uniform(seed, offset + i) < p, kept values scaled", "[dropout]") {
  const double p = 0.3;
  const Tensor x = random({6, 50}, 91, DType::f32);
  const Tensor y = ops::dropout(x, p, 42, 1000);
  const std::vector<double> xv = x.to_vector();
  std::vector<double> expected;
  for (size_t i = 0; i < xv.size(); ++i)
    expected.push_back(philox_uniform(42, 1000 + i) < p ? 0.0 : xv[i] / (1 - p));
  require_close(y, expected, 1e-6, 1e-6);

  // Non-contiguous input: the mask follows the logical (row-major) index.
  const Tensor xt = test::transposed(x);
  require_close(ops::dropout(xt, p, 42, 1000), expected, 1e-6, 1e-6);

  // Backward uses the same mask.
  require_close(ops::dropout_backward(x, p, 42, 1000), expected, 1e-6, 1e-6);
}

TEST_CASE("dropout: deterministic per (seed, offset), drop fraction near p", "[dropout]") {
  const Tensor x = ones({200000});
  const Tensor a = ops::dropout(x, 0.25, 7, 0), b = ops::dropout(x, 0.25, 7, 0);
  test::require_equal(a, b);
  REQUIRE(ops::dropout(x, 0.25, 8, 0).to_vector() != a.to_vector());
  REQUIRE(ops::dropout(x, 0.25, 7, 1).to_vector() != a.to_vector());
  int64_t dropped = 0;
  for (double v : a.to_vector()) {
    if (v == 0.0) ++dropped;
    else REQUIRE(v == Approx(1.0 / 0.75));
  }
  REQUIRE(double(dropped) / 200000.0 == Approx(0.25).margin(0.005));
}

TEST_CASE("dropout: p = 0 and eval mode are the identity; half dtypes", "[dropout]") {
  const Tensor x = random({3, 4}, 92, DType::f32);
  require_close(ops::dropout(x, 0.0, 1, 0), x, 0, 0);
  REQUIRE(dropout(x, 0.5, false).same_as(x));
  const Tensor h = random({64}, 93, DType::bf16);
  const Tensor y = ops::dropout(h, 0.5, 3, 0);
  REQUIRE(y.dtype() == DType::bf16);
  const std::vector<double> hv = h.to_vector(), yv = y.to_vector();
  for (size_t i = 0; i < hv.size(); ++i) {
    const double e = philox_uniform(3, i) < 0.5 ? 0.0 : hv[i] * 2;  // exact: scaling by 2
    REQUIRE(yv[i] == e);
  }
}

TEST_CASE("dropout: the default generator supplies (seed, offset) and advances by numel", "[dropout]") {
  const Tensor x = random({4, 5}, 94, DType::f32);
  manual_seed(123);
  const Tensor first = dropout(x, 0.5);
  const Tensor second = dropout(x, 0.5);
  REQUIRE(default_generator().offset == 40);
  test::require_equal(first, ops::dropout(x, 0.5, 123, 0));
  test::require_equal(second, ops::dropout(x, 0.5, 123, 20));
}

TEST_CASE("dropout: gradients", "[dropout][grad]") {
  require_gradcheck([](const std::vector<Tensor>& in) { return dropout(in[0], 0.4, 5, 77); }, {leaf(random({3, 7}, 95))});
  // d y / d x is the mask / (1 - p).
  Tensor x = leaf(random({50}, 96));
  Tape tape;
  const Tensor y = tape.record([&] { return dropout(x, 0.4, 5, 0); });
  tape.backward({y}, {ones({50}, DType::f64)});
  std::vector<double> expected;
  for (uint64_t i = 0; i < 50; ++i) expected.push_back(philox_uniform(5, i) < 0.4 ? 0.0 : 1.0 / 0.6);
  require_close(x.grad(), expected, 1e-12, 1e-12);
}

TEST_CASE("dropout: bad inputs", "[dropout][errors]") {
  const Tensor x = ones({4});
  REQUIRE_THROWS_WITH(ops::dropout(x, 1.0, 0, 0), Catch::Contains("dropout: p must be in [0, 1), got 1"));
  REQUIRE_THROWS_WITH(ops::dropout(x, -0.1, 0, 0), Catch::Contains("dropout: p must be in [0, 1), got -0.1"));
  REQUIRE_THROWS_WITH(ops::dropout_backward(x, 1.5, 0, 0), Catch::Contains("dropout_backward: p must be in [0, 1)"));
  REQUIRE_THROWS_WITH(ops::dropout(ones({4}, DType::i32), 0.5, 0, 0),
                      Catch::Contains("dropout: expected a floating-point tensor, got i32"));
}

// =====================================================================================================
// f64 statistics (regression: mean/rstd and lse used to be saved in f32 whatever the input dtype, so
// an f64 backward was only ~1e-7 accurate and gradcheck failed on rows far from zero)
// =====================================================================================================

TEST_CASE("layer_norm, rms_norm and cross_entropy save f64 statistics for f64 inputs, f32 otherwise",
          "[norm][cross_entropy]") {
  const DType dtype = GENERATE(DType::f32, DType::f64, DType::bf16);
  CAPTURE(dtype_name(dtype));
  const DType stats = dtype == DType::f64 ? DType::f64 : DType::f32;
  const Tensor x = random({3, 5}, 301, dtype);
  const ops::NormOutput ln = ops::layer_norm(x, Tensor(), Tensor(), 1e-5);
  REQUIRE(ln.mean.dtype() == stats);
  REQUIRE(ln.rstd.dtype() == stats);
  REQUIRE(ops::rms_norm(x, Tensor(), 1e-5).rstd.dtype() == stats);
  const auto ce = ops::cross_entropy(x, tensor({0, 4, 2}, DType::i64), -100, ops::Reduction::mean);
  REQUIRE(ce.lse.dtype() == stats);
  REQUIRE(ce.loss.dtype() == stats);  // the loss too: a bf16 one would keep 3 significant digits
}

TEST_CASE("layer_norm and rms_norm: f64 gradients of rows far from zero", "[norm][grad]") {
  // Mean 1000, spread 1e-3: rstd ~ 1e3, so an f32 mean (error ~3e-5) would shift every x_hat by ~0.03.
  const Tensor x = leaf(ops::scale_shift(random({3, 6}, 302), 1e-3, 1000.0));
  const Tensor w = leaf(random({6}, 303)), b = leaf(random({6}, 304));
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-12); }, {x, w, b});
  require_gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-12); },
                    {leaf(ops::scale_shift(random({3, 6}, 305), 1e-3, 1000.0)), w});

  // The forward agrees with plain f64 loops to f64 precision, not f32's.
  const ops::NormOutput out = ops::layer_norm(x.detach(), Tensor(), Tensor(), 1e-12);
  const NormRef ref = ref_norm(x.to_vector(), 6, {}, {}, 1e-12, true);
  require_close(out.y, ref.y, 1e-9, 1e-9);
  require_close(out.mean, ref.mean, 1e-12, 1e-15);
  require_close(out.rstd, ref.rstd, 1e-6, 1e-12);
}

TEST_CASE("cross_entropy: f64 gradients of logits far from zero", "[cross_entropy][grad]") {
  // lse ~ 1000, where an f32 value is only good to ~6e-5: exp(x - lse) would be off by as much.
  const Tensor logits = leaf(ops::scale_shift(random({4, 5}, 306), 0.5, 1000.0));
  const Tensor targets = tensor({1, 0, 4, 2}, DType::i64);
  require_gradcheck([targets](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets); }, {logits});

  const auto out = ops::cross_entropy(logits.detach(), targets, -100, ops::Reduction::sum);
  std::vector<double> lse;  // max + log(sum(exp(x - max))): exp(1000) itself would overflow
  for (int64_t i = 0; i < 4; ++i) {
    double m = logits.at({i, 0}), s = 0;
    for (int64_t j = 1; j < 5; ++j) m = std::max(m, logits.at({i, j}));
    for (int64_t j = 0; j < 5; ++j) s += std::exp(logits.at({i, j}) - m);
    lse.push_back(m + std::log(s));
  }
  require_close(out.lse, lse, 1e-12, 1e-15);
  const Tensor grad = ops::cross_entropy_backward(scalar(1.0, DType::f64), logits.detach(), targets, out, -100,
                                                  ops::Reduction::sum);
  std::vector<double> expected;
  const std::vector<int64_t> t = {1, 0, 4, 2};
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      expected.push_back(std::exp(logits.at({i, j}) - lse[size_t(i)]) - (j == t[size_t(i)] ? 1.0 : 0.0));
  require_close(grad, expected, 1e-13, 1e-12);
}

// =====================================================================================================
// adamw_step_ in-place safety (the op writes params and both moments in place)
// =====================================================================================================

TEST_CASE("adamw_step_: a destination holding one element twice is refused, an aliased gradient is copied",
          "[adamw][errors]") {
  const Tensor ok = zeros({3}), row = zeros({1, 3});
  REQUIRE_THROWS_WITH(ops::adamw_step_({row.expand({2, 3})}, {zeros({2, 3})}, {zeros({2, 3})}, {zeros({2, 3})}, {}),
                      Catch::Contains("adamw_step_: destination has overlapping elements"));
  REQUIRE_THROWS_WITH(ops::adamw_step_({ok}, {zeros({3})}, {zeros({1}).expand({3})}, {zeros({3})}, {}),
                      Catch::Contains("adamw_step_: destination has overlapping elements"));

  // The gradient is the parameter itself: the update must see the gradient as it was before the step.
  const Tensor p = tensor({1, -2, 3}, DType::f64), q = p.clone();
  ops::AdamWParams hyper;
  hyper.lr = 0.1;
  ops::adamw_step_({p}, {p}, {zeros({3}, DType::f64)}, {zeros({3}, DType::f64)}, hyper);
  ops::adamw_step_({q}, {q.clone()}, {zeros({3}, DType::f64)}, {zeros({3}, DType::f64)}, hyper);
  test::require_equal(p, q);
}
