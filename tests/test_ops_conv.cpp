// conv2d, max_pool2d and avg_pool2d: forward and backward against the textbook definitions written
// below as plain f64 loops, gradcheck through the tape, non-contiguous and bf16 inputs, the split
// (input-grad now, weight-grad later) backward, and bad inputs.
#include <cmath>
#include <limits>

#include "test_util.h"

using namespace brigade;
using test::require_gradcheck;

namespace {

// ---- conv2d reference -------------------------------------------------------------------------

struct ConvCase {
  int64_t N, C, H, W, O, KH, KW, stride, padding;
  int64_t OH() const { return (H + 2 * padding - KH) / stride + 1; }
  int64_t OW() const { return (W + 2 * padding - KW) / stride + 1; }
  Shape x_shape() const { return {N, C, H, W}; }
  Shape w_shape() const { return {O, C, KH, KW}; }
  Shape y_shape() const { return {N, O, OH(), OW()}; }
  ops::Conv2dParams params() const { return {stride, padding}; }
};

// Calls f(y_index, w_index, x_index) for every product w * x of the convolution whose x is a real
// element (not padding): y[n, o, oh, ow] += w[o, c, kh, kw] * x[n, c, oh*s - p + kh, ow*s - p + kw].
template <class F>
void for_each_product(const ConvCase& k, F&& f) {
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t o = 0; o < k.O; ++o)
      for (int64_t oh = 0; oh < k.OH(); ++oh)
        for (int64_t ow = 0; ow < k.OW(); ++ow)
          for (int64_t c = 0; c < k.C; ++c)
            for (int64_t kh = 0; kh < k.KH; ++kh)
              for (int64_t kw = 0; kw < k.KW; ++kw) {
                int64_t ih = oh * k.stride - k.padding + kh, iw = ow * k.stride - k.padding + kw;
                if (ih < 0 || ih >= k.H || iw < 0 || iw >= k.W) continue;
                f(size_t(((n * k.O + o) * k.OH() + oh) * k.OW() + ow), size_t(((o * k.C + c) * k.KH + kh) * k.KW + kw),
                  size_t(((n * k.C + c) * k.H + ih) * k.W + iw));
              }
}

std::vector<double> ref_conv2d(const ConvCase& k, const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b) {
  std::vector<double> y(size_t(shape_numel(k.y_shape())), 0.0);
  if (!b.empty())
    for (size_t i = 0; i < y.size(); ++i) y[i] = b[(i / size_t(k.OH() * k.OW())) % size_t(k.O)];
  for_each_product(k, [&](size_t yi, size_t wi, size_t xi) { y[yi] += w[wi] * x[xi]; });
  return y;
}

std::vector<double> ref_conv2d_grad_x(const ConvCase& k, const std::vector<double>& gy, const std::vector<double>& w) {
  std::vector<double> gx(size_t(shape_numel(k.x_shape())), 0.0);
  for_each_product(k, [&](size_t yi, size_t wi, size_t xi) { gx[xi] += w[wi] * gy[yi]; });
  return gx;
}

std::vector<double> ref_conv2d_grad_w(const ConvCase& k, const std::vector<double>& gy, const std::vector<double>& x) {
  std::vector<double> gw(size_t(shape_numel(k.w_shape())), 0.0);
  for_each_product(k, [&](size_t yi, size_t wi, size_t xi) { gw[wi] += gy[yi] * x[xi]; });
  return gw;
}

std::vector<double> ref_conv2d_grad_b(const ConvCase& k, const std::vector<double>& gy) {
  std::vector<double> gb(size_t(k.O), 0.0);
  for (size_t i = 0; i < gy.size(); ++i) gb[(i / size_t(k.OH() * k.OW())) % size_t(k.O)] += gy[i];
  return gb;
}

// ---- pooling reference ------------------------------------------------------------------------

struct PoolCase {
  int64_t N, C, H, W, kernel, stride, padding;
  int64_t OH() const { return (H + 2 * padding - kernel) / stride + 1; }
  int64_t OW() const { return (W + 2 * padding - kernel) / stride + 1; }
  Shape x_shape() const { return {N, C, H, W}; }
  Shape y_shape() const { return {N, C, OH(), OW()}; }
  ops::Pool2dParams params() const { return {kernel, stride, padding}; }
};

// Calls f(y_index, x_index, index_in_plane) for every real element of every window, each window in
// row-major order.
template <class F>
void for_each_window_element(const PoolCase& k, F&& f) {
  for (int64_t plane = 0; plane < k.N * k.C; ++plane)
    for (int64_t oh = 0; oh < k.OH(); ++oh)
      for (int64_t ow = 0; ow < k.OW(); ++ow)
        for (int64_t kh = 0; kh < k.kernel; ++kh)
          for (int64_t kw = 0; kw < k.kernel; ++kw) {
            int64_t ih = oh * k.stride - k.padding + kh, iw = ow * k.stride - k.padding + kw;
            if (ih < 0 || ih >= k.H || iw < 0 || iw >= k.W) continue;
            f(size_t((plane * k.OH() + oh) * k.OW() + ow), size_t((plane * k.H + ih) * k.W + iw), ih * k.W + iw);
          }
}

std::pair<std::vector<double>, std::vector<double>> ref_max_pool2d(const PoolCase& k, const std::vector<double>& x) {
  size_t n = size_t(shape_numel(k.y_shape()));
  std::vector<double> y(n, -std::numeric_limits<double>::infinity()), idx(n, -1);
  for_each_window_element(k, [&](size_t yi, size_t xi, int64_t in_plane) {
    if (x[xi] > y[yi]) {  // strictly greater: the first maximum wins
      y[yi] = x[xi];
      idx[yi] = double(in_plane);
    }
  });
  return {y, idx};
}

std::vector<double> ref_avg_pool2d(const PoolCase& k, const std::vector<double>& x) {
  std::vector<double> y(size_t(shape_numel(k.y_shape())), 0.0);
  for_each_window_element(k, [&](size_t yi, size_t xi, int64_t) { y[yi] += x[xi] / double(k.kernel * k.kernel); });
  return y;
}

std::vector<double> ref_max_pool2d_grad(const PoolCase& k, const std::vector<double>& gy, const std::vector<double>& idx) {
  std::vector<double> gx(size_t(shape_numel(k.x_shape())), 0.0);
  size_t out_plane = size_t(k.OH() * k.OW()), in_plane = size_t(k.H * k.W);
  for (size_t i = 0; i < gy.size(); ++i) gx[(i / out_plane) * in_plane + size_t(idx[i])] += gy[i];
  return gx;
}

std::vector<double> ref_avg_pool2d_grad(const PoolCase& k, const std::vector<double>& gy) {
  std::vector<double> gx(size_t(shape_numel(k.x_shape())), 0.0);
  for_each_window_element(k, [&](size_t yi, size_t xi, int64_t) { gx[xi] += gy[yi] / double(k.kernel * k.kernel); });
  return gx;
}


}  // namespace

// ================================ conv2d ================================

TEST_CASE("conv2d: hand-checked single-channel cases") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, DType::f64);
  Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {1, 1, 2, 2}, DType::f64);

  SECTION("valid convolution, with and without bias") {
    // y[0,0] = 1*1 + 2*2 + 3*4 + 4*5 = 37, and each step right adds 1+2+3+4 = 10, each step down 30.
    test::require_close(ops::conv2d(x, w, Tensor(), {}), {37, 47, 67, 77});
    test::require_close(ops::conv2d(x, w, tensor({0.5}, DType::f64), {}), {37.5, 47.5, 67.5, 77.5});
  }
  SECTION("padding 1 and stride 2 over a 2x2 input") {
    Tensor small = from_vector(std::vector<double>{1, 2, 3, 4}, {1, 1, 2, 2}, DType::f64);
    Tensor box = ones({1, 1, 2, 2}, DType::f64);
    Tensor y = ops::conv2d(small, box, Tensor(), {1, 1});  // every 2x2 window sum of the zero-padded input
    REQUIRE(y.shape() == Shape{1, 1, 3, 3});
    test::require_close(y, {1, 3, 2, 4, 10, 6, 3, 7, 4});
    test::require_close(ops::conv2d(small, box, Tensor(), {2, 1}), {1, 2, 3, 4});  // only the corners
  }
  SECTION("backward of the valid case") {
    Tensor gy = ones({1, 1, 2, 2}, DType::f64);
    // Each x pixel receives the sum of the weights that touched it: corners one, edges two, centre four.
    test::require_close(ops::conv2d_backward_input(gy, w, x.shape(), {}), {1, 3, 2, 4, 10, 6, 3, 7, 4});
    // Each weight receives the sum of the 2x2 block of x it slid over.
    test::require_close(ops::conv2d_backward_weight(gy, x, w.shape(), {}), {12, 16, 24, 28});
    test::require_close(ops::conv2d_backward_bias(gy), {4});
  }
}

TEST_CASE("conv2d: forward and backward match direct f64 loops") {
  ConvCase k = GENERATE(ConvCase{2, 3, 7, 5, 4, 3, 3, 2, 1},  // stride 2, padding 1, odd sizes
                        ConvCase{1, 1, 5, 5, 1, 3, 3, 1, 0},  // the plain case
                        ConvCase{3, 2, 6, 9, 3, 2, 3, 1, 2},  // non-square kernel, padding 2
                        ConvCase{2, 4, 8, 8, 5, 1, 1, 1, 0},  // 1x1 convolution
                        ConvCase{2, 3, 9, 7, 2, 5, 3, 3, 1},  // stride 3
                        ConvCase{2, 2, 6, 6, 2, 3, 3, 4, 1},  // stride > kernel: some pixels unused
                        ConvCase{1, 2, 3, 3, 2, 5, 5, 1, 1}); // kernel only fits thanks to padding
  DType dtype = GENERATE(DType::f64, DType::f32);
  double tol = dtype == DType::f64 ? 1e-12 : 1e-4;
  CAPTURE(k.N, k.C, k.H, k.W, k.O, k.KH, k.KW, k.stride, k.padding, dtype_name(dtype));

  Tensor x = test::random(k.x_shape(), 1, dtype);
  Tensor w = test::random(k.w_shape(), 2, dtype);
  Tensor b = test::random({k.O}, 3, dtype);
  Tensor gy = test::random(k.y_shape(), 4, dtype);

  Tensor y = ops::conv2d(x, w, b, k.params());
  REQUIRE(y.shape() == k.y_shape());
  REQUIRE(y.dtype() == dtype);
  test::require_close(y, ref_conv2d(k, x.to_vector(), w.to_vector(), b.to_vector()), tol, tol);
  test::require_close(ops::conv2d(x, w, Tensor(), k.params()), ref_conv2d(k, x.to_vector(), w.to_vector(), {}), tol, tol);

  Tensor gx = ops::conv2d_backward_input(gy, w, k.x_shape(), k.params());
  REQUIRE(gx.dtype() == dtype);
  test::require_close(gx, ref_conv2d_grad_x(k, gy.to_vector(), w.to_vector()), tol, tol);
  Tensor gw = ops::conv2d_backward_weight(gy, x, k.w_shape(), k.params());
  REQUIRE(gw.shape() == k.w_shape());
  test::require_close(gw, ref_conv2d_grad_w(k, gy.to_vector(), x.to_vector()), tol, tol);
  test::require_close(ops::conv2d_backward_bias(gy), ref_conv2d_grad_b(k, gy.to_vector()), tol, tol);
}

TEST_CASE("conv2d: non-contiguous operands give the contiguous results") {
  ConvCase k{2, 3, 6, 5, 4, 3, 2, 2, 1};
  Tensor x = test::random(k.x_shape(), 11), w = test::random(k.w_shape(), 12), b = test::random({k.O}, 13);
  Tensor gy = test::random(k.y_shape(), 14);
  std::vector<double> xv = x.to_vector(), wv = w.to_vector(), gyv = gy.to_vector();

  Tensor xs = test::strided(x), wt = test::transposed(w), bs = test::strided(b), gys = test::transposed(gy);
  REQUIRE((!xs.is_contiguous() && !wt.is_contiguous() && !bs.is_contiguous() && !gys.is_contiguous()));
  test::require_close(ops::conv2d(xs, wt, bs, k.params()), ref_conv2d(k, xv, wv, b.to_vector()), 1e-12, 1e-12);
  test::require_close(ops::conv2d_backward_input(gys, wt, k.x_shape(), k.params()), ref_conv2d_grad_x(k, gyv, wv),
                      1e-12, 1e-12);
  test::require_close(ops::conv2d_backward_weight(gys, xs, k.w_shape(), k.params()), ref_conv2d_grad_w(k, gyv, xv),
                      1e-12, 1e-12);
  test::require_close(ops::conv2d_backward_bias(gys), ref_conv2d_grad_b(k, gyv), 1e-12, 1e-12);

  // A channel slice of a bigger batch: offset and strides on the outer dims, not just the last one.
  Tensor wide = test::random({k.N, k.C + 2, k.H, k.W}, 15);
  Tensor channels = wide.slice(1, 1, 1 + k.C);
  test::require_close(ops::conv2d(channels, w, b, k.params()),
                      ref_conv2d(k, ops::contiguous(channels).to_vector(), wv, b.to_vector()), 1e-12, 1e-12);
}

TEST_CASE("conv2d: bf16 operands compute in f32 and round once") {
  ConvCase k{2, 3, 6, 6, 2, 3, 3, 1, 1};
  Tensor x = test::random(k.x_shape(), 21, DType::bf16);
  Tensor w = test::random(k.w_shape(), 22, DType::bf16);
  Tensor b = test::random({k.O}, 23, DType::bf16);
  Tensor gy = test::random(k.y_shape(), 24, DType::bf16);
  // The references use the bf16 values exactly; what remains is bf16's rounding of each result
  // (relative 2^-9) plus f32 summation.
  Tensor y = ops::conv2d(x, w, b, k.params());
  REQUIRE(y.dtype() == DType::bf16);
  test::require_close(y, ref_conv2d(k, x.to_vector(), w.to_vector(), b.to_vector()), 2e-2, 1e-2);
  Tensor gx = ops::conv2d_backward_input(gy, w, k.x_shape(), k.params());
  REQUIRE(gx.dtype() == DType::bf16);
  test::require_close(gx, ref_conv2d_grad_x(k, gy.to_vector(), w.to_vector()), 2e-2, 1e-2);
  Tensor gw = ops::conv2d_backward_weight(gy, x, k.w_shape(), k.params());
  REQUIRE(gw.dtype() == DType::bf16);
  test::require_close(gw, ref_conv2d_grad_w(k, gy.to_vector(), x.to_vector()), 5e-2, 1e-2);
  Tensor gb = ops::conv2d_backward_bias(gy);
  REQUIRE(gb.dtype() == DType::bf16);
  test::require_close(gb, ref_conv2d_grad_b(k, gy.to_vector()), 5e-2, 1e-2);
}

TEST_CASE("conv2d and pooling: results do not depend on the thread count") {
  // Big enough that the kernels split their planes across threads when more than one is available.
  Tensor x = test::random({4, 3, 16, 16}, 35, DType::f32), w = test::random({8, 3, 3, 3}, 36, DType::f32);
  Tensor gy = test::random({4, 8, 8, 8}, 37, DType::f32);
  auto run_all = [&] {
    ops::Conv2dParams p{2, 1};
    return std::vector<Tensor>{ops::conv2d(x, w, Tensor(), p), ops::conv2d_backward_input(gy, w, x.shape(), p),
                               ops::conv2d_backward_weight(gy, x, w.shape(), p), ops::conv2d_backward_bias(gy),
                               ops::max_pool2d(x, {3, 2, 1}).first, ops::avg_pool2d_backward(gy, {4, 8, 16, 16}, {3, 2, 1})};
  };
  int threads = num_threads();
  std::vector<Tensor> parallel = run_all();
  set_num_threads(1);
  std::vector<Tensor> serial = run_all();
  set_num_threads(threads);
  for (size_t i = 0; i < parallel.size(); ++i) test::require_equal(parallel[i], serial[i]);
}

TEST_CASE("conv2d: an empty batch gives empty outputs and zero weight gradients") {
  ConvCase k{0, 2, 4, 4, 3, 3, 3, 1, 1};
  Tensor x = zeros(k.x_shape(), DType::f64), w = test::random(k.w_shape(), 31);
  Tensor y = ops::conv2d(x, w, test::random({3}, 32), k.params());
  REQUIRE(y.shape() == Shape{0, 3, 4, 4});
  Tensor gy = zeros(k.y_shape(), DType::f64);
  REQUIRE(ops::conv2d_backward_input(gy, w, k.x_shape(), k.params()).shape() == k.x_shape());
  test::require_close(ops::conv2d_backward_weight(gy, x, k.w_shape(), k.params()),
                      std::vector<double>(size_t(shape_numel(k.w_shape())), 0.0));
  test::require_close(ops::conv2d_backward_bias(gy), {0, 0, 0});
}

TEST_CASE("conv2d: gradcheck for input, weight and bias") {
  Tensor x = test::leaf(test::random({2, 2, 5, 4}, 41));
  Tensor w = test::leaf(test::random({3, 2, 3, 2}, 42));
  Tensor b = test::leaf(test::random({3}, 43));
  SECTION("stride 2, padding 1, with bias") {
    require_gradcheck([](const std::vector<Tensor>& in) { return brigade::conv2d(in[0], in[1], in[2], 2, 1); },
                      {x, w, b});
  }
  SECTION("stride 1, no padding, no bias") {
    require_gradcheck([](const std::vector<Tensor>& in) { return brigade::conv2d(in[0], in[1], Tensor()); }, {x, w});
  }
}

TEST_CASE("conv2d: the backward computes only the gradients asked for") {
  Tensor x = test::leaf(test::random({1, 2, 4, 4}, 51));
  Tensor w = test::leaf(test::random({3, 2, 3, 3}, 52));
  Tensor b = test::leaf(test::random({3}, 53));
  Tape tape;
  Tensor y;
  {
    TapeGuard guard(tape);
    y = brigade::conv2d(x, w, b, 1, 1);
  }
  REQUIRE(tape.size() == 1);
  Tensor gy = test::random(y.shape(), 54);
  const BackwardFn& backward = tape.nodes()[0].backward;

  std::vector<Tensor> input_only = backward({gy}, {true, false, false});
  REQUIRE(input_only.size() == 3);
  REQUIRE((input_only[0].defined() && !input_only[1].defined() && !input_only[2].defined()));
  std::vector<Tensor> params_only = backward({gy}, {false, true, true});
  REQUIRE((!params_only[0].defined() && params_only[1].defined() && params_only[2].defined()));

  ConvCase k{1, 2, 4, 4, 3, 3, 3, 1, 1};
  test::require_close(input_only[0], ref_conv2d_grad_x(k, gy.to_vector(), w.to_vector()), 1e-12, 1e-12);
  test::require_close(params_only[1], ref_conv2d_grad_w(k, gy.to_vector(), x.to_vector()), 1e-12, 1e-12);
  test::require_close(params_only[2], ref_conv2d_grad_b(k, gy.to_vector()), 1e-12, 1e-12);
}

namespace {

// A small CNN for the split-backward tests: conv -> max pool -> conv -> avg pool. Returns the
// gradients of x and of the four parameters after a whole backward (split = false), or after
// backward_input then backward_weight; `x_grad_after_input` receives x's gradient between the two.
std::vector<Tensor> small_cnn_grads(bool split, Tensor* x_grad_after_input = nullptr) {
  Tensor x = test::leaf(test::random({2, 2, 8, 7}, 61));
  Tensor w1 = test::leaf(test::random({3, 2, 3, 3}, 62)), b1 = test::leaf(test::random({3}, 63));
  Tensor w2 = test::leaf(test::random({4, 3, 2, 2}, 64)), b2 = test::leaf(test::random({4}, 65));
  Tape tape;
  Tensor y;
  {
    TapeGuard guard(tape);
    Tensor h = brigade::max_pool2d(brigade::conv2d(x, w1, b1, 1, 1), 3, 2, 1);
    y = brigade::avg_pool2d(brigade::conv2d(h, w2, b2, 1, 0), 2, 1);
  }
  Tensor gy = test::random(y.shape(), 66);
  if (split) {
    tape.backward_input({y}, {gy}, {x});
    REQUIRE(x.grad().defined());
    for (const Tensor& p : {w1, b1, w2, b2}) REQUIRE(!p.grad().defined());  // deferred to phase 2
    if (x_grad_after_input) *x_grad_after_input = ops::clone(x.grad());
    tape.backward_weight();
  } else {
    tape.backward({y}, {gy});
  }
  return {x.grad(), w1.grad(), b1.grad(), w2.grad(), b2.grad()};
}

}  // namespace

TEST_CASE("conv2d: input-grad then weight-grad equals the whole backward") {
  Tensor x_grad_after_input;
  std::vector<Tensor> whole = small_cnn_grads(false), split = small_cnn_grads(true, &x_grad_after_input);
  test::require_equal(x_grad_after_input, whole[0]);
  for (size_t i = 1; i < whole.size(); ++i) {
    INFO("parameter gradient " << i);
    REQUIRE(split[i].defined());
    test::require_equal(split[i], whole[i]);
  }
}

// Regression: backward_weight() once re-derived its targets as every leaf requiring grad, so a phase-1
// input (x) feeding the same node as a weight received its gradient twice.
TEST_CASE("conv2d: backward_weight leaves the input gradient alone", "[conv][autograd]") {
  Tensor x_grad_after_input;
  std::vector<Tensor> split = small_cnn_grads(true, &x_grad_after_input);
  test::require_equal(split[0], x_grad_after_input);
}

TEST_CASE("conv2d: bad inputs name the problem") {
  Tensor x = zeros({1, 3, 5, 5}), w = zeros({2, 3, 3, 3});
  using Catch::Contains;
  REQUIRE_THROWS_WITH(ops::conv2d(zeros({3, 5, 5}), w, Tensor(), {}),
                      Contains("conv2d: expected a 4-D input") && Contains("[3, 5, 5]"));
  REQUIRE_THROWS_WITH(ops::conv2d(x, zeros({2, 3, 3}), Tensor(), {}),
                      Contains("expected a 4-D weight") && Contains("[2, 3, 3]"));
  REQUIRE_THROWS_WITH(ops::conv2d(x, zeros({2, 4, 3, 3}), Tensor(), {}),
                      Contains("input shape [1, 3, 5, 5] has 3 channels but weight shape [2, 4, 3, 3] expects 4"));
  REQUIRE_THROWS_WITH(ops::conv2d(zeros({1, 3, 2, 2}), w, Tensor(), {}),
                      Contains("kernel 3x3") && Contains("larger than the padded input 2x2") &&
                          Contains("[1, 3, 2, 2]"));
  REQUIRE(ops::conv2d(zeros({1, 3, 2, 2}), w, Tensor(), {1, 1}).shape() == Shape{1, 2, 2, 2});  // padding makes it fit
  REQUIRE_THROWS_WITH(ops::conv2d(x, w, Tensor(), {0, 0}), Contains("conv2d: stride must be at least 1, got 0"));
  REQUIRE_THROWS_WITH(ops::conv2d(x, w, Tensor(), {1, -1}), Contains("conv2d: padding must be non-negative, got -1"));
  REQUIRE_THROWS_WITH(ops::conv2d(x, w, zeros({3}), {}), Contains("bias shape [3]") && Contains("[2, 3, 3, 3]"));
  REQUIRE_THROWS_WITH(ops::conv2d(x, zeros({2, 3, 3, 3}, DType::f64), Tensor(), {}),
                      Contains("conv2d: dtypes differ: f32 and f64"));
  REQUIRE_THROWS_WITH(ops::conv2d(zeros({1, 3, 5, 5}, DType::i64), zeros({2, 3, 3, 3}, DType::i64), Tensor(), {}),
                      Contains("expected a floating-point tensor, got i64"));
  REQUIRE_THROWS_WITH(ops::conv2d(Tensor(), w, Tensor(), {}), Contains("conv2d: input is an undefined tensor"));
  REQUIRE_THROWS_WITH(brigade::conv2d(x, w, Tensor(), 1, -2), Contains("padding must be non-negative, got -2"));

  Tensor gy = zeros({1, 2, 3, 3});
  REQUIRE_THROWS_WITH(ops::conv2d_backward_input(zeros({1, 2, 4, 4}), w, x.shape(), {}),
                      Contains("conv2d_backward_input: grad_y shape [1, 2, 4, 4]") && Contains("[1, 2, 3, 3]"));
  REQUIRE_THROWS_WITH(ops::conv2d_backward_input(gy, w, {1, 4, 5, 5}, {}), Contains("has 4 channels"));
  REQUIRE_THROWS_WITH(ops::conv2d_backward_weight(gy, x, {2, 3, 2, 2}, {}),
                      Contains("conv2d_backward_weight: grad_y shape [1, 2, 3, 3]") && Contains("[1, 2, 4, 4]"));
  REQUIRE_THROWS_WITH(ops::conv2d_backward_bias(zeros({2, 3})), Contains("conv2d_backward_bias: expected a 4-D"));
}

// ================================ pooling ================================

TEST_CASE("max_pool2d: hand-checked values and argmax indices") {
  Tensor x = from_vector(std::vector<double>{1, 5, 2, 0,  //
                                             3, 4, 8, 8,  //
                                             9, 0, 1, 1,  //
                                             2, 9, 1, 0},
                         {1, 1, 4, 4}, DType::f64);
  SECTION("2x2 windows side by side; ties keep the first maximum") {
    auto [y, idx] = ops::max_pool2d(x, {2, 2, 0});
    test::require_close(y, {5, 8, 9, 1});
    REQUIRE(idx.dtype() == DType::i64);
    test::require_close(idx, {1, 6, 8, 10});
  }
  SECTION("3x3 windows, stride 2, padding 1") {
    auto [y, idx] = ops::max_pool2d(x, {3, 2, 1});
    test::require_close(y, {5, 8, 9, 9});
    test::require_close(idx, {1, 6, 8, 13});
  }
  SECTION("padding never wins, even over negative values") {
    Tensor neg = from_vector(std::vector<double>{-1, -2, -3, -4}, {1, 1, 2, 2}, DType::f64);
    auto [y, idx] = ops::max_pool2d(neg, {2, 1, 1});
    test::require_close(y, {-1, -1, -2, -1, -1, -2, -3, -3, -4});
    test::require_close(idx, {0, 0, 1, 0, 0, 1, 2, 2, 3});
  }
  SECTION("a constant plane: every window points at its first element") {
    auto [y, idx] = ops::max_pool2d(full({1, 1, 4, 4}, 7.0, DType::f64), {2, 2, 0});
    test::require_close(idx, {0, 2, 8, 10});
  }
  SECTION("NaN propagates") {
    Tensor with_nan = ops::clone(x);
    with_nan.data<double>()[5] = std::nan("");
    auto [y, idx] = ops::max_pool2d(with_nan, {2, 2, 0});
    std::vector<double> v = y.to_vector();
    REQUIRE(std::isnan(v[0]));
    REQUIRE(idx.to_vector()[0] == 5);
    REQUIRE(v[1] == 8);
  }
  SECTION("backward: overlapping windows add up at a shared maximum") {
    // A 3x3 plane whose centre is the maximum of all nine 3x3 windows (stride 1, padding 1).
    Tensor peak = from_vector(std::vector<double>{0, 0, 0, 0, 1, 0, 0, 0, 0}, {1, 1, 3, 3}, DType::f64);
    auto [y, idx] = ops::max_pool2d(peak, {3, 1, 1});
    test::require_close(idx, std::vector<double>(9, 4.0));
    Tensor gy = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, DType::f64);
    test::require_close(ops::max_pool2d_backward(gy, idx, peak.shape(), {3, 1, 1}), {0, 0, 0, 0, 45, 0, 0, 0, 0});
  }
}

TEST_CASE("avg_pool2d: hand-checked, padding counts in the divisor") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4}, {1, 1, 2, 2}, DType::f64);
  Tensor y = ops::avg_pool2d(x, {2, 1, 1});  // every window divides by 4, however much is padding
  test::require_close(y, {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
  test::require_close(ops::avg_pool2d(x, {2, 2, 0}), {2.5});
  // Backward: each input pixel is in four windows, each passing back a quarter of its gradient.
  test::require_close(ops::avg_pool2d_backward(ones({1, 1, 3, 3}, DType::f64), x.shape(), {2, 1, 1}),
                      {1, 1, 1, 1});
}

TEST_CASE("pooling: forward and backward match direct f64 loops") {
  PoolCase k = GENERATE(PoolCase{2, 3, 6, 6, 2, 2, 0},   // windows side by side
                        PoolCase{2, 2, 7, 5, 3, 2, 1},   // overlapping, padded, odd sizes
                        PoolCase{1, 3, 9, 8, 3, 3, 0},   // stride 3
                        PoolCase{3, 1, 5, 6, 4, 1, 2},   // padding = kernel / 2
                        PoolCase{1, 2, 7, 7, 2, 3, 1});  // stride > kernel: some pixels unused
  DType dtype = GENERATE(DType::f64, DType::f32);
  bool noncontiguous = GENERATE(false, true);
  double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
  CAPTURE(k.N, k.C, k.H, k.W, k.kernel, k.stride, k.padding, dtype_name(dtype), noncontiguous);

  Tensor x = test::random(k.x_shape(), 71, dtype);
  Tensor gy = test::random(k.y_shape(), 72, dtype);
  std::vector<double> xv = x.to_vector(), gyv = gy.to_vector();
  if (noncontiguous) {
    x = test::strided(x);
    gy = test::transposed(gy);
  }

  auto [y, idx] = ops::max_pool2d(x, k.params());
  auto [ref_y, ref_idx] = ref_max_pool2d(k, xv);
  REQUIRE(y.shape() == k.y_shape());
  test::require_close(y, ref_y, 0, 0);  // a maximum is one of the inputs, exactly
  test::require_close(idx, ref_idx, 0, 0);
  test::require_close(ops::max_pool2d_backward(gy, idx, k.x_shape(), k.params()), ref_max_pool2d_grad(k, gyv, ref_idx),
                      tol, tol);
  if (noncontiguous)  // indices as a view too
    test::require_close(ops::max_pool2d_backward(gy, test::transposed(idx), k.x_shape(), k.params()),
                        ref_max_pool2d_grad(k, gyv, ref_idx), tol, tol);

  test::require_close(ops::avg_pool2d(x, k.params()), ref_avg_pool2d(k, xv), tol, tol);
  test::require_close(ops::avg_pool2d_backward(gy, k.x_shape(), k.params()), ref_avg_pool2d_grad(k, gyv), tol, tol);
}

TEST_CASE("pooling: gradcheck") {
  Tensor x = test::leaf(test::random({2, 2, 5, 6}, 81));
  SECTION("max, overlapping and padded") {
    require_gradcheck([](const std::vector<Tensor>& in) { return brigade::max_pool2d(in[0], 3, 2, 1); }, {x});
  }
  SECTION("max, default stride") {
    require_gradcheck([](const std::vector<Tensor>& in) { return brigade::max_pool2d(in[0], 2); }, {x});
  }
  SECTION("avg, overlapping and padded") {
    require_gradcheck([](const std::vector<Tensor>& in) { return brigade::avg_pool2d(in[0], 3, 2, 1); }, {x});
  }
  SECTION("avg, default stride") {
    require_gradcheck([](const std::vector<Tensor>& in) { return brigade::avg_pool2d(in[0], 2); }, {x});
  }
}

TEST_CASE("pooling: stride -1 means stride = kernel") {
  Tensor x = test::random({1, 2, 7, 9}, 91);
  REQUIRE(brigade::max_pool2d(x, 3).shape() == Shape{1, 2, 2, 3});
  REQUIRE(brigade::avg_pool2d(x, 2).shape() == Shape{1, 2, 3, 4});
  test::require_equal(brigade::max_pool2d(x, 3), ops::max_pool2d(x, {3, 3, 0}).first);
  test::require_equal(brigade::avg_pool2d(x, 2, -1, 1), ops::avg_pool2d(x, {2, 2, 1}));
}

TEST_CASE("pooling: bf16 inputs") {
  PoolCase k{2, 2, 6, 5, 3, 2, 1};
  Tensor x = test::random(k.x_shape(), 101, DType::bf16);
  Tensor gy = test::random(k.y_shape(), 102, DType::bf16);
  auto [y, idx] = ops::max_pool2d(x, k.params());
  auto [ref_y, ref_idx] = ref_max_pool2d(k, x.to_vector());
  REQUIRE(y.dtype() == DType::bf16);
  test::require_close(y, ref_y, 0, 0);  // the maximum of bf16 values is a bf16 value
  test::require_close(idx, ref_idx, 0, 0);
  Tensor gx = ops::max_pool2d_backward(gy, idx, k.x_shape(), k.params());
  REQUIRE(gx.dtype() == DType::bf16);
  test::require_close(gx, ref_max_pool2d_grad(k, gy.to_vector(), ref_idx), 2e-2, 1e-2);
  Tensor avg = ops::avg_pool2d(x, k.params());
  REQUIRE(avg.dtype() == DType::bf16);
  test::require_close(avg, ref_avg_pool2d(k, x.to_vector()), 1e-2, 1e-2);
  Tensor avg_gx = ops::avg_pool2d_backward(gy, k.x_shape(), k.params());
  REQUIRE(avg_gx.dtype() == DType::bf16);
  test::require_close(avg_gx, ref_avg_pool2d_grad(k, gy.to_vector()), 1e-2, 1e-2);
}

TEST_CASE("pooling: bad inputs name the problem") {
  using Catch::Contains;
  Tensor x = zeros({1, 2, 4, 4});
  REQUIRE_THROWS_WITH(ops::max_pool2d(zeros({2, 4, 4}), {2, 2, 0}),
                      Contains("max_pool2d: expected a 4-D input") && Contains("[2, 4, 4]"));
  REQUIRE_THROWS_WITH(ops::avg_pool2d(zeros({4, 4}), {2, 2, 0}), Contains("avg_pool2d: expected a 4-D input"));
  REQUIRE_THROWS_WITH(ops::max_pool2d(x, {0, 1, 0}), Contains("kernel size must be at least 1, got 0"));
  REQUIRE_THROWS_WITH(brigade::max_pool2d(x, 2, 0), Contains("max_pool2d: stride must be at least 1, got 0"));
  REQUIRE_THROWS_WITH(brigade::avg_pool2d(x, 3, 1, 2),
                      Contains("avg_pool2d: padding 2 must be between 0 and half the kernel size 3"));
  REQUIRE_THROWS_WITH(ops::max_pool2d(x, {2, 2, -1}), Contains("padding -1 must be between 0"));
  REQUIRE_THROWS_WITH(ops::max_pool2d(zeros({1, 2, 2, 2}), {3, 1, 0}),
                      Contains("kernel 3x3 is larger than the padded input 2x2") && Contains("[1, 2, 2, 2]"));
  REQUIRE_THROWS_WITH(ops::max_pool2d(zeros({1, 2, 0, 4}), {1, 1, 0}), Contains("has an empty spatial dim"));
  REQUIRE_THROWS_WITH(ops::avg_pool2d(zeros({1, 2, 4, 4}, DType::i32), {2, 2, 0}),
                      Contains("avg_pool2d: expected a floating-point tensor, got i32"));

  auto [y, idx] = ops::max_pool2d(x, {2, 2, 0});
  Tensor gy = ones(y.shape());
  REQUIRE_THROWS_WITH(ops::max_pool2d_backward(gy, full(y.shape(), 16, DType::i64), x.shape(), {2, 2, 0}),
                      Contains("max_pool2d_backward: index 16") && Contains("out of range for a 4x4 input plane"));
  REQUIRE_THROWS_WITH(ops::max_pool2d_backward(gy, full(y.shape(), -1, DType::i64), x.shape(), {2, 2, 0}),
                      Contains("index -1"));
  REQUIRE_THROWS_WITH(ops::max_pool2d_backward(gy, ops::to_dtype(idx, DType::i32), x.shape(), {2, 2, 0}),
                      Contains("indices must be i64, got i32"));
  REQUIRE_THROWS_WITH(ops::max_pool2d_backward(ones({1, 2, 3, 3}), idx, x.shape(), {2, 2, 0}),
                      Contains("grad_y shape [1, 2, 3, 3] does not match the output shape [1, 2, 2, 2]"));
  REQUIRE_THROWS_WITH(ops::max_pool2d_backward(gy, zeros({1, 2, 4}, DType::i64), x.shape(), {2, 2, 0}),
                      Contains("indices shape [1, 2, 4] differs from grad_y shape [1, 2, 2, 2]"));
  REQUIRE_THROWS_WITH(ops::avg_pool2d_backward(ones({1, 2, 3, 3}), x.shape(), {2, 2, 0}),
                      Contains("avg_pool2d_backward: grad_y shape [1, 2, 3, 3]"));
}
