// autograd/: the tape's semantics (reuse, accumulation, guards, several tapes, the input/weight split)
// and gradcheck itself. Op-specific gradients are checked in the ops suites.
#include <thread>

#include "test_util.h"

using namespace brigade;

namespace {

// f(x, w) = sum(tanh(x * w + x) * x): x is used three times, w once; a shared subexpression.
Tensor chain(const Tensor& x, const Tensor& w) {
  Tensor a = x * w + x;
  return sum(tanh(a) * x);
}

// The same gradient written out by hand in f64: d/dx = tanh(a) + x (1 - tanh^2 a)(w + 1),
// d/dw = x^2 (1 - tanh^2 a), with a = x (w + 1).
void chain_grads(const std::vector<double>& x, const std::vector<double>& w, std::vector<double>& gx,
                 std::vector<double>& gw) {
  gx.resize(x.size());
  gw.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double a = x[i] * (w[i] + 1), t = std::tanh(a), dt = 1 - t * t;
    gx[i] = t + x[i] * dt * (w[i] + 1);
    gw[i] = x[i] * x[i] * dt;
  }
}

}  // namespace

TEST_CASE("a tensor used several times receives the sum of its gradients", "[autograd]") {
  Tensor x = test::leaf(test::random({5}, 1));
  Tensor w = test::leaf(test::random({5}, 2));
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = chain(x, w);
  }
  REQUIRE(tape.size() > 0);
  tape.backward(loss);
  REQUIRE(tape.empty());  // not retained
  std::vector<double> gx, gw;
  chain_grads(x.to_vector(), w.to_vector(), gx, gw);
  test::require_close(x.grad(), gx, 1e-12, 1e-12);
  test::require_close(w.grad(), gw, 1e-12, 1e-12);
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[autograd]") {
  Tensor x = test::leaf(test::random({4}, 3));
  Tensor w = test::leaf(test::random({4}, 4));
  std::vector<double> gx, gw;
  chain_grads(x.to_vector(), w.to_vector(), gx, gw);

  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = chain(x, w);
  }
  tape.backward(loss, /*retain=*/true);
  REQUIRE(!tape.empty());
  tape.backward(loss);  // replays the same tape a second time
  for (double& g : gx) g *= 2;
  test::require_close(x.grad(), gx, 1e-12, 1e-12);

  x.zero_grad();
  REQUIRE(!x.grad().defined());
  Tape again;
  {
    TapeGuard guard(again);
    loss = chain(x, w);
  }
  again.backward(loss);
  for (double& g : gx) g /= 2;
  test::require_close(x.grad(), gx, 1e-12, 1e-12);
}

TEST_CASE("nothing is recorded without a tape or under NoGradGuard", "[autograd]") {
  Tensor x = test::leaf(test::random({3}, 5));
  Tensor y = x * 2.0;  // no active tape
  REQUIRE(!y.requires_grad());

  Tape tape;
  TapeGuard guard(tape);
  {
    NoGradGuard no_grad;
    REQUIRE(!grad_enabled());
    Tensor z = exp(x);
    REQUIRE(!z.requires_grad());
  }
  REQUIRE(grad_enabled());
  REQUIRE(tape.empty());
  Tensor constant = test::random({3}, 6);  // requires no grad: ops on it alone are not recorded
  Tensor c2 = constant * constant;
  REQUIRE(tape.empty());
  Tensor z = x * constant;
  REQUIRE(tape.size() == 1);
  REQUIRE(z.requires_grad());
  REQUIRE(!z.is_leaf());
}

TEST_CASE("detach cuts the tape", "[autograd]") {
  Tensor x = test::leaf(test::random({3}, 7));
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    Tensor y = x * x;
    Tensor d = y.detach();
    REQUIRE(!d.requires_grad());
    REQUIRE(d.storage().same_as(y.storage()));
    loss = sum(d * x);  // gradient only through the second factor: d/dx = x^2
  }
  tape.backward(loss);
  std::vector<double> xv = x.to_vector(), expected;
  for (double v : xv) expected.push_back(v * v);
  test::require_close(x.grad(), expected, 1e-12, 1e-12);
}

TEST_CASE("two tapes recorded interleaved stay independent", "[autograd]") {
  Tensor x = test::leaf(test::random({4}, 8));
  Tensor w = test::leaf(test::random({4}, 9));
  Tape a, b;
  Tensor la, lb;
  {
    TapeGuard ga(a);
    Tensor ta = x * w;  // recorded on a
    {
      TapeGuard gb(b);  // nested guard: b is active now
      lb = sum(exp(x));
    }
    la = sum(ta * ta);  // back on a
  }
  REQUIRE(active_tape() == nullptr);
  b.backward(lb);
  std::vector<double> xv = x.to_vector(), wv = w.to_vector(), ex;
  for (double v : xv) ex.push_back(std::exp(v));
  test::require_close(x.grad(), ex, 1e-12, 1e-12);
  REQUIRE(!w.grad().defined());  // tape b never touched w

  x.zero_grad();
  a.backward(la);
  std::vector<double> gx, gw;
  for (size_t i = 0; i < xv.size(); ++i) {
    gx.push_back(2 * xv[i] * wv[i] * wv[i]);
    gw.push_back(2 * wv[i] * xv[i] * xv[i]);
  }
  test::require_close(x.grad(), gx, 1e-12, 1e-12);
  test::require_close(w.grad(), gw, 1e-12, 1e-12);
}

TEST_CASE("backward_input then backward_weight equals one backward, bitwise", "[autograd]") {
  // A stage-like function: input x (the activation a stage receives), weights w and b.
  auto stage = [](const Tensor& x, const Tensor& w, const Tensor& b) { return tanh(x * w + b) * w; };
  Tensor x0 = test::random({2, 3}, 10), w0 = test::random({3}, 11), b0 = test::random({2, 3}, 12);
  Tensor gy = test::random({2, 3}, 13);

  Tensor x1 = test::leaf(x0), w1 = test::leaf(w0), b1 = test::leaf(b0);
  Tape whole;
  Tensor y1;
  {
    TapeGuard g(whole);
    y1 = stage(x1, w1, b1);
  }
  whole.backward({y1}, {gy});

  Tensor x2 = test::leaf(x0), w2 = test::leaf(w0), b2 = test::leaf(b0);
  Tape split;
  Tensor y2;
  {
    TapeGuard g(split);
    y2 = stage(x2, w2, b2);
  }
  split.backward_input({y2}, {gy}, {x2});
  REQUIRE(x2.grad().defined());
  REQUIRE(!w2.grad().defined());  // weights wait for phase 2
  REQUIRE(!b2.grad().defined());
  test::require_equal(x2.grad(), x1.grad());
  split.backward_weight();
  test::require_equal(x2.grad(), x1.grad());  // phase 2 must not add to the input's gradient again
  test::require_equal(w2.grad(), w1.grad());
  test::require_equal(b2.grad(), b1.grad());
  REQUIRE(split.empty());
}

TEST_CASE("backward_input defers work done on weights alone (a bf16 copy of a weight) to backward_weight",
          "[autograd]") {
  // Mixed precision: each f32 weight is used through a bf16 copy, a non-leaf computed from the weight
  // alone. Its gradient is still weight work, so phase 1 must not compute it. t = tanh(copy of w)
  // is weight-only too, and is also a root (like a skip connection's stashed tensor), so its
  // gradient is the root's plus what the matmul sends back: the sum must form as in one backward.
  // `spy` is the identity with a backward that counts its runs: it stands for the weight-side
  // work whose timing matters.
  int spy_runs = 0;
  auto spy = [&spy_runs](const Tensor& t) {
    Tensor out = ops::clone(t);
    record("spy", {t}, {out}, [&spy_runs](const std::vector<Tensor>& g, const std::vector<bool>&) {
      ++spy_runs;
      return std::vector<Tensor>{g[0]};
    });
    return out;
  };
  auto stage = [&](const Tensor& x, const Tensor& w) {
    Tensor t = spy(tanh(to_dtype(w, DType::bf16)));
    Tensor y = matmul(to_dtype(x, DType::bf16), t);
    return std::make_pair(y, t);
  };
  Tensor x0 = test::random({4, 3}, 20, DType::f32), w0 = test::random({3, 5}, 21, DType::f32);
  Tensor gy = test::random({4, 5}, 22, DType::bf16), gt = test::random({3, 5}, 23, DType::bf16);

  Tensor x1 = test::leaf(x0), w1 = test::leaf(w0);
  Tape whole;
  std::pair<Tensor, Tensor> out1;
  {
    TapeGuard g(whole);
    out1 = stage(x1, w1);
  }
  whole.backward({out1.first, out1.second}, {gy, gt});

  Tensor x2 = test::leaf(x0), w2 = test::leaf(w0);
  Tape split;
  std::pair<Tensor, Tensor> out2;
  {
    TapeGuard g(split);
    out2 = stage(x2, w2);
  }
  spy_runs = 0;
  split.backward_input({out2.first, out2.second}, {gy, gt}, {x2});
  REQUIRE(x2.grad().defined());
  REQUIRE(!w2.grad().defined());
  REQUIRE(spy_runs == 0);  // nothing computed from w alone ran in phase 1
  test::require_equal(x2.grad(), x1.grad());
  split.backward_weight();
  REQUIRE(spy_runs == 1);
  test::require_equal(x2.grad(), x1.grad());
  REQUIRE(w2.grad().dtype() == DType::f32);
  test::require_equal(w2.grad(), w1.grad());
  REQUIRE(split.empty());
}

TEST_CASE("gradcheck accepts correct gradients and catches a wrong one", "[autograd][gradcheck]") {
  Tensor x = test::leaf(test::random({3, 2}, 14));
  Tensor w = test::leaf(test::random({3, 2}, 15));
  auto ok = gradcheck([](const std::vector<Tensor>& in) { return tanh(in[0] * in[1] + in[0]) * in[0]; }, {x, w});
  INFO(ok.message);
  REQUIRE(ok);

  // A deliberately wrong backward (claims d/dx x^2 = x): gradcheck must fail and say where.
  auto wrong_square = [](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor y = ops::binary(ops::BinaryOp::mul, x, x);
    record("wrong_square", {x}, {y}, [](const std::vector<Tensor>& g, const std::vector<bool>&) {
      return std::vector<Tensor>{g[0]};
    });
    return y;
  };
  Tensor z = test::leaf(test::random({4}, 16));
  auto bad = gradcheck(wrong_square, {z});
  REQUIRE(!bad);
  REQUIRE_THAT(bad.message, Catch::Contains("input 0") && Catch::Contains("finite differences"));

  // Non-contiguous leaves are perturbed through their strides.
  Tensor base = test::random({3, 4}, 17);
  Tensor t = base.transpose(0, 1);
  t.requires_grad_(true);
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return exp(in[0]) * in[0]; }, {t}));
}

TEST_CASE("autograd misuse is reported clearly", "[autograd]") {
  Tensor x = test::leaf(test::random({3}, 18));
  Tape tape;
  Tensor y;
  {
    TapeGuard g(tape);
    y = x * 3.0;
  }
  REQUIRE_THROWS_WITH(tape.backward(y), Catch::Contains("backward: expected a one-element loss, got shape [3]"));
  REQUIRE_THROWS_WITH(tape.backward({y}, {zeros({2}, DType::f64)}),
                      Catch::Contains("gradient for root 0 has shape [2] but the root has shape [3]"));
  REQUIRE_THROWS_WITH(tape.backward_weight(), Catch::Contains("backward_input has not run"));
  REQUIRE_THROWS_WITH(y.requires_grad_(false), Catch::Contains("only leaf tensors"));
  REQUIRE_THROWS_WITH(zeros({2}, DType::i64).requires_grad_(), Catch::Contains("only floating-point tensors"));
  Tensor c = test::random({3}, 19);
  REQUIRE_THROWS_WITH(tape.backward({c}, {c}), Catch::Contains("root 0 does not require grad"));
  REQUIRE_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return in[0]; }, {test::leaf(zeros({2}))}),
                      Catch::Contains("must be a f64 cpu tensor"));
}

TEST_CASE("linear is one node: forward, gradcheck, and weight work deferred to phase 2", "[autograd][linear]") {
  Tensor x = test::random({2, 3, 4}, 20), w = test::random({5, 4}, 21), b = test::random({5}, 22);
  // Forward against f64 loops.
  Tensor y = linear(x, w, b);
  REQUIRE(y.shape() == Shape{2, 3, 5});
  std::vector<double> xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector(), expected;
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 5; ++o) {
      double s = bv[size_t(o)];
      for (int i = 0; i < 4; ++i) s += xv[size_t(r * 4 + i)] * wv[size_t(o * 4 + i)];
      expected.push_back(s);
    }
  test::require_close(y, expected, 1e-12, 1e-12);

  auto f = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  REQUIRE(gradcheck(f, {test::leaf(x), test::leaf(w), test::leaf(b)}));
  Tensor x_t = test::transposed(test::random({3, 4}, 23));  // a non-contiguous leaf
  x_t.requires_grad_(true);
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], Tensor()); }, {x_t, test::leaf(w)}));

  Tensor xl = test::leaf(x), wl = test::leaf(w), bl = test::leaf(b);
  Tape tape;
  Tensor out;
  {
    TapeGuard g(tape);
    out = linear(xl, wl, bl);
  }
  REQUIRE(tape.size() == 1);  // one node, not transpose + matmul + add
  tape.backward_input({out}, {ones_like(out)}, {xl});
  REQUIRE(xl.grad().defined());
  REQUIRE(!wl.grad().defined());
  REQUIRE(!bl.grad().defined());
  tape.backward_weight();
  // d/db of sum = number of rows; d/dW[o][i] = sum over rows of x[r][i].
  test::require_close(bl.grad(), std::vector<double>(5, 6.0), 1e-12, 1e-12);
  std::vector<double> gw;
  for (int o = 0; o < 5; ++o)
    for (int i = 0; i < 4; ++i) {
      double s = 0;
      for (int r = 0; r < 6; ++r) s += xv[size_t(r * 4 + i)];
      gw.push_back(s);
    }
  test::require_close(wl.grad(), gw, 1e-12, 1e-12);

  REQUIRE_THROWS_WITH(linear(x, test::random({5, 3}, 24), b),
                      Catch::Contains("linear: input shape [2, 3, 4] does not end in weight's in_features (weight shape [5, 3])"));
  REQUIRE_THROWS_WITH(linear(x, w, test::random({4}, 25)), Catch::Contains("linear: bias shape [4] should be [5]"));
}

TEST_CASE("modifying a saved tensor in place before backward is an error, not a wrong gradient", "[autograd]") {
  Tensor a = test::leaf(test::random({3}, 30));
  Tensor b = test::random({3}, 31);
  Tape tape;
  Tensor loss;
  {
    TapeGuard g(tape);
    loss = sum(a * b);
  }
  ops::fill_(b, 100.0);
  REQUIRE_THROWS_WITH(tape.backward(loss), Catch::Contains("backward of mul: input 1 (shape [3]) was modified in place"));
}

TEST_CASE("a gradient that would flow into another tape is reported", "[autograd]") {
  Tensor w = test::leaf(test::random({3}, 32));
  Tape first, second;
  Tensor h, loss;
  {
    TapeGuard g(first);
    h = w * 2.0;
  }
  {
    TapeGuard g(second);
    loss = sum(h * 3.0);
  }
  REQUIRE_THROWS_WITH(second.backward(loss), Catch::Contains("not produced on this tape"));
}

TEST_CASE("gradients must match the tensor they belong to", "[autograd]") {
  Tensor x = test::leaf(test::random({3}, 33));
  REQUIRE_THROWS_WITH(x.set_grad(zeros({3}, DType::i64)), Catch::Contains("set_grad: gradient is i64 on cpu but the tensor is f64 on cpu"));
  Tape tape;
  TapeGuard g(tape);
  Tensor i = x.to(DType::i32);
  REQUIRE(!i.requires_grad());
  REQUIRE(tape.empty());
}

TEST_CASE("to_dtype: values rounded once forward, gradient converted back to the input's dtype", "[autograd]") {
  Tensor x = test::leaf(test::random({7}, 31, DType::f32));
  Tensor c = test::random({7}, 32, DType::bf16);  // a bf16 constant the bf16 copy is weighted with
  Tape tape;
  Tensor y, loss;
  {
    TapeGuard guard(tape);
    y = to_dtype(x, DType::bf16);
    loss = sum(y * c);
  }
  REQUIRE(y.dtype() == DType::bf16);
  // Forward: each value rounded to bf16 by the type's own constructor (an independent rounding).
  const std::vector<double> xv = x.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) REQUIRE(y.to_vector()[i] == test::round_to(DType::bf16, float(xv[i])));
  tape.backward(loss);
  // d loss / d x = c, delivered in f32 (the dtype of x), exactly: bf16 values are f32 values.
  REQUIRE(x.grad().dtype() == DType::f32);
  REQUIRE(x.grad().to_vector() == c.to_vector());

  // The same dtype is the tensor itself (no copy, no tape node); integers carry no gradient.
  Tape other;
  {
    TapeGuard guard(other);
    REQUIRE(to_dtype(x, DType::f32).same_as(x));
    REQUIRE(other.size() == 0);
    Tensor ints = to_dtype(x, DType::i32);
    REQUIRE(ints.dtype() == DType::i32);
    REQUIRE(other.size() == 0);
  }
  // Through a chain f64 -> f32 -> f64 the gradient of 3x is exactly 3, in f64.
  Tensor z = test::leaf(test::random({5}, 33));
  Tape chain;
  Tensor out;
  {
    TapeGuard guard(chain);
    out = sum(to_dtype(to_dtype(z, DType::f32) * 3.0, DType::f64));
  }
  chain.backward(out);
  REQUIRE(z.grad().dtype() == DType::f64);
  for (double g : z.grad().to_vector()) REQUIRE(g == 3.0);
}

TEST_CASE("autocast: f32 inputs and parameters taken in the scope's dtype, gradients back in f32", "[autograd][autocast]") {
  Tensor x = test::leaf(test::random({4, 6}, 41, DType::f32));
  Tensor w = test::leaf(test::random({5, 6}, 42, DType::f32));
  Tensor b = test::leaf(test::random({5}, 43, DType::f32));
  Tensor c = test::random({4, 5}, 44, DType::bf16);  // weights the output, so every gradient differs

  // Under the scope: no casts written.
  Tape tape;
  Tensor y;
  Tensor loss = tape.record([&] {
    Autocast bf16(DType::bf16);
    REQUIRE(autocast_dtype() == DType::bf16);
    y = linear(x, w, b);
    return sum(y * c);
  });
  REQUIRE(!autocast_dtype());  // the scope ended with the block
  REQUIRE(y.dtype() == DType::bf16);
  tape.backward(loss);

  // The reference: the same computation with every conversion written out, no scope.
  Tensor xr = test::leaf(x.detach().clone()), wr = test::leaf(w.detach().clone()), br = test::leaf(b.detach().clone());
  Tape ref;
  Tensor yr;
  Tensor loss_r = ref.record([&] {
    yr = linear(to_dtype(xr, DType::bf16), to_dtype(wr, DType::bf16), to_dtype(br, DType::bf16));
    return sum(yr * c);
  });
  ref.backward(loss_r);
  test::require_equal(y, yr);
  for (auto [got, want] : {std::pair{x, xr}, {w, wr}, {b, br}}) {
    REQUIRE(got.grad().dtype() == DType::f32);  // the master copy's dtype
    test::require_equal(got.grad(), want.grad());
  }
}

TEST_CASE("autocast: what it leaves alone, and how scopes nest", "[autograd][autocast]") {
  Autocast bf16(DType::bf16);
  Tensor x64 = test::random({3, 3}, 51);  // f64: gradcheck's dtype passes untouched
  REQUIRE(matmul(x64, x64).dtype() == DType::f64);
  Tensor x = test::random({3, 3}, 52, DType::f32);
  REQUIRE(matmul(x, x).dtype() == DType::bf16);
  REQUIRE(autocast(tensor({1, 2}, DType::i64)).dtype() == DType::i64);  // integers pass
  // Elementwise ops keep two f32 operands in f32; a 16-bit operand wins over an f32 one.
  REQUIRE((x * x).dtype() == DType::f32);
  REQUIRE((to_dtype(x, DType::bf16) * x).dtype() == DType::bf16);
  REQUIRE((x + to_dtype(x, DType::bf16)).dtype() == DType::bf16);
  REQUIRE(concat({x, to_dtype(x, DType::bf16)}, 0).dtype() == DType::bf16);
  REQUIRE(exp(x).dtype() == DType::f32);
  REQUIRE(softmax(x, -1).dtype() == DType::f32);
  REQUIRE((x * 2.0).dtype() == DType::f32);
  // An explicit conversion, a reduction and a loss keep what they were given.
  REQUIRE(to_dtype(x, DType::f32).dtype() == DType::f32);
  REQUIRE(sum(x).dtype() == DType::f32);
  REQUIRE(mean(x, {1}).dtype() == DType::f32);
  REQUIRE(cross_entropy(x, tensor({0, 2, 1}, DType::i64)).dtype() == DType::f32);
  REQUIRE(embedding(x, tensor({2, 0}, DType::i64)).dtype() == DType::bf16);  // the rows, converted
  {
    Autocast off(std::nullopt);  // an inner scope wins until it ends
    REQUIRE(!autocast_dtype());
    REQUIRE(matmul(x, x).dtype() == DType::f32);
    Autocast f16(DType::f16);
    REQUIRE(matmul(x, x).dtype() == DType::f16);
  }
  REQUIRE(autocast_dtype() == DType::bf16);
  // Per thread: another thread starts with none.
  std::optional<DType> seen = DType::f64;
  std::thread([&] { seen = autocast_dtype(); }).join();
  REQUIRE(!seen);
  REQUIRE_THROWS_WITH(Autocast(DType::i32), Catch::Contains("compute dtype must be floating point, got i32"));
}

TEST_CASE("autocast: the backward runs with no scope", "[autograd][autocast]") {
  Tensor x = test::leaf(test::random({4}, 61, DType::f32));
  std::optional<DType> during_backward = DType::f64;
  Tape tape;
  Tensor loss = tape.record([&] {
    Autocast bf16(DType::bf16);
    Tensor h = exp(matmul(x.view({1, 4}), ones({4, 1})));  // bf16, from the matmul
    Tensor probed = h.detach();
    record("probe", {h}, {probed}, [&](const std::vector<Tensor>& g, const std::vector<bool>&) {
      during_backward = autocast_dtype();
      return std::vector<Tensor>{g[0]};
    });
    return sum(to_dtype(probed, DType::f32));  // (so the probe's backward runs)
  });
  Autocast outer(DType::bf16);  // even when backward is called inside a scope
  tape.backward(loss);
  REQUIRE(!during_backward);
  REQUIRE(x.grad().dtype() == DType::f32);
}
