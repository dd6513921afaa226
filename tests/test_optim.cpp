// optim/ and ops::adamw_step_: updates against f64 formulas written out here, state round trips,
// clipping, schedules and bad inputs.
#include "test_util.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "optim/optim.h"

using namespace brigade;
using namespace brigade::optim;

namespace {

// ---- independent f64 references ----

struct AdamRef {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 1e-2;
  std::vector<double> p, m, v;
  int t = 0;

  explicit AdamRef(std::vector<double> init) : p(std::move(init)), m(p.size(), 0.0), v(p.size(), 0.0) {}

  void step(const std::vector<double>& g) {
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] -= lr * wd * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(beta1, t));
      const double vhat = v[i] / (1 - std::pow(beta2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

struct SgdRef {
  double lr = 0.1, momentum = 0, dampening = 0, wd = 0;
  bool nesterov = false;
  std::vector<double> p, buf;

  explicit SgdRef(std::vector<double> init) : p(std::move(init)) {}

  void step(const std::vector<double>& g) {
    const bool first = buf.empty();
    if (first) buf.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + wd * p[i];
      if (momentum != 0) {
        buf[i] = first ? d : momentum * buf[i] + (1 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  }
};

// A fresh gradient for step `k` of parameter `p` (different every step).
Tensor grad_for(const Tensor& p, uint64_t k, DType dtype = DType::f64) {
  return test::random(p.shape(), 1000 + 17 * k, dtype);
}

Tensor param(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Tensor p = test::random(shape, seed, dtype);
  p.requires_grad_(true);
  return p;
}

// Sets p.grad directly, bypassing set_grad's checks (to feed deliberately wrong gradients).
void force_grad(const Tensor& p, const Tensor& g) { p.impl().grad = g.impl_ptr(); }

// One AdamW step on parameters a and b with gradients ga and gb, and the same step of their
// references.
void step_both(AdamW& opt, Tensor& a, AdamRef& ra, const Tensor& ga, Tensor& b, AdamRef& rb, const Tensor& gb) {
  a.set_grad(ga);
  b.set_grad(gb);
  opt.step();
  ra.step(ga.to_vector());
  rb.step(gb.to_vector());
}

std::vector<double> scaled(std::vector<double> v, double s) {
  for (double& x : v) x *= s;
  return v;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor ca = ops::contiguous(a), cb = ops::contiguous(b);
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

}  // namespace

// ============================== ops::adamw_step_ ==============================

TEST_CASE("adamw_step_ matches the f64 formula over several steps, with weight decay", "[optim][adamw]") {
  AdamRef ref(test::random({3, 4}, 1).to_vector());
  ref.lr = 0.05;
  ref.wd = 0.1;
  ref.beta1 = 0.8;
  ref.beta2 = 0.95;
  ref.eps = 1e-6;
  Tensor p = from_vector(ref.p, {3, 4}, DType::f64);
  Tensor m = zeros({3, 4}, DType::f64), v = zeros({3, 4}, DType::f64);
  for (int t = 1; t <= 5; ++t) {
    Tensor g = grad_for(p, uint64_t(t));
    ref.step(g.to_vector());
    ops::adamw_step_({p}, {g}, {m}, {v}, {.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1, .step = t});
    test::require_close(p, ref.p, 1e-14, 1e-12);
    test::require_close(m, ref.m, 1e-15, 1e-13);
    test::require_close(v, ref.v, 1e-15, 1e-13);
  }
}

TEST_CASE("adamw_step_ on f32 parameters with f32 state tracks the f64 formula", "[optim][adamw]") {
  AdamRef ref(test::random({7, 5}, 2, DType::f32).to_vector());
  ref.lr = 0.01;
  Tensor p = from_vector(ref.p, {7, 5}, DType::f32);
  Tensor m = zeros({7, 5}), v = zeros({7, 5});
  for (int t = 1; t <= 4; ++t) {
    Tensor g = grad_for(p, uint64_t(t), DType::f32);
    ref.step(g.to_vector());
    ops::adamw_step_({p}, {g}, {m}, {v}, {.lr = 0.01, .step = t});
  }
  test::require_close(p, ref.p, 1e-6, 1e-5);
}

TEST_CASE("adamw_step_ by hand: one step from p = 1, g = 0.5", "[optim][adamw]") {
  // m = 0.05, v = 0.00025; mhat = 0.5, vhat = 0.25; p = 1 * (1 - 0.1 * 0.1) - 0.1 * 0.5 / (0.5 + 1e-8).
  Tensor p = tensor({1.0}, DType::f64), g = tensor({0.5}, DType::f64);
  Tensor m = zeros({1}, DType::f64), v = zeros({1}, DType::f64);
  ops::adamw_step_({p}, {g}, {m}, {v}, {.lr = 0.1, .weight_decay = 0.1, .step = 1});
  REQUIRE(p.item() == Approx(0.99 - 0.05 / (0.5 + 1e-8)).epsilon(1e-15));
  REQUIRE(p.item() == Approx(0.890000002).epsilon(1e-12));
  REQUIRE(m.item() == Approx(0.05).epsilon(1e-15));
  REQUIRE(v.item() == Approx(0.00025).epsilon(1e-15));
}

TEST_CASE("adamw_step_ on many tensors equals one call per tensor, bitwise", "[optim][adamw]") {
  const std::vector<Shape> shapes = {{4, 3}, {5}, {}, {2, 3, 2}, {0, 4}};
  std::vector<Tensor> p1, p2, g, m1, m2, v1, v2;
  for (size_t i = 0; i < shapes.size(); ++i) {
    p1.push_back(test::random(shapes[i], 10 + i, DType::f32));
    p2.push_back(ops::clone(p1.back()));
    g.push_back(test::random(shapes[i], 20 + i, DType::f32));
    m1.push_back(test::random(shapes[i], 30 + i, DType::f32, 0.1));
    v1.push_back(ops::pow_scalar(test::random(shapes[i], 40 + i, DType::f32, 0.1), 2));
    m2.push_back(ops::clone(m1.back()));
    v2.push_back(ops::clone(v1.back()));
  }
  const ops::AdamWParams hyper{.lr = 0.02, .weight_decay = 0.05, .step = 3};
  ops::adamw_step_(p1, g, m1, v1, hyper);
  for (size_t i = 0; i < shapes.size(); ++i) ops::adamw_step_({p2[i]}, {g[i]}, {m2[i]}, {v2[i]}, hyper);
  for (size_t i = 0; i < shapes.size(); ++i) {
    REQUIRE(bitwise_equal(p1[i], p2[i]));
    REQUIRE(bitwise_equal(m1[i], m2[i]));
    REQUIRE(bitwise_equal(v1[i], v2[i]));
  }
}

TEST_CASE("adamw_step_ handles strided parameters, gradients and state", "[optim][adamw]") {
  Tensor p = test::random({4, 6}, 3, DType::f32), g = test::random({4, 6}, 4, DType::f32);
  Tensor m = test::random({4, 6}, 5, DType::f32, 0.1), v = ops::pow_scalar(test::random({4, 6}, 6, DType::f32), 2);
  Tensor ps = test::strided(p), gs = test::transposed(g), ms = test::strided(m), vs = test::transposed(v);
  const ops::AdamWParams hyper{.lr = 0.1, .step = 2};
  ops::adamw_step_({p}, {g}, {m}, {v}, hyper);
  ops::adamw_step_({ps}, {gs}, {ms}, {vs}, hyper);
  REQUIRE(!ps.is_contiguous());
  REQUIRE(bitwise_equal(ps, p));
  REQUIRE(bitwise_equal(ms, m));
  REQUIRE(bitwise_equal(vs, v));
}

TEST_CASE("adamw_step_ updates bf16 and f16 parameters through f32 math", "[optim][adamw]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  Tensor p32 = ops::to_dtype(test::random({3, 5}, 7, dtype), DType::f32);  // representable in dtype
  Tensor p = ops::to_dtype(p32, dtype);
  Tensor g = test::random({3, 5}, 8, dtype);
  Tensor m = zeros({3, 5}), v = zeros({3, 5}), m32 = zeros({3, 5}), v32 = zeros({3, 5});
  const ops::AdamWParams hyper{.lr = 0.1, .step = 1};
  ops::adamw_step_({p}, {g}, {m}, {v}, hyper);
  ops::adamw_step_({p32}, {ops::to_dtype(g, DType::f32)}, {m32}, {v32}, hyper);
  REQUIRE(p.dtype() == dtype);
  REQUIRE(bitwise_equal(p, ops::to_dtype(p32, dtype)));  // one rounding, at the end
  REQUIRE(bitwise_equal(m, m32));
  REQUIRE(bitwise_equal(v, v32));
}

TEST_CASE("adamw_step_ rejects bad inputs and changes nothing", "[optim][adamw][errors]") {
  Tensor p = ones({2, 3}), g = ones({2, 3}), m = zeros({2, 3}), v = zeros({2, 3});
  Tensor p2 = ones({4}), g_bad = ones({3}), m2 = zeros({4}), v2 = zeros({4});
  REQUIRE_THROWS_WITH(ops::adamw_step_({p, p2}, {g}, {m, m2}, {v, v2}, {}),
                      Catch::Contains("adamw_step_") && Catch::Contains("2 params, 1 grads"));
  // Entry 1 is bad: entry 0 must not have been updated either.
  REQUIRE_THROWS_WITH(ops::adamw_step_({p, p2}, {g, g_bad}, {m, m2}, {v, v2}, {}),
                      Catch::Contains("param 1 has shape [4] but its grad has shape [3]"));
  REQUIRE(p.to_vector() == std::vector<double>(6, 1.0));
  REQUIRE(m.to_vector() == std::vector<double>(6, 0.0));
  REQUIRE_THROWS_WITH(ops::adamw_step_({p}, {g}, {zeros({3, 2})}, {v}, {}),
                      Catch::Contains("param 0 has shape [2, 3]") && Catch::Contains("[3, 2] (exp_avg)"));
  REQUIRE_THROWS_WITH(ops::adamw_step_({ones({2}, DType::i64)}, {ones({2})}, {zeros({2})}, {zeros({2})}, {}),
                      Catch::Contains("param 0 (i64)") && Catch::Contains("floating-point"));
  REQUIRE_THROWS_WITH(ops::adamw_step_({p}, {g}, {zeros({2, 3}, DType::bf16)}, {v}, {}),
                      Catch::Contains("must be f32 or f64") && Catch::Contains("bf16"));
  REQUIRE_THROWS_WITH(ops::adamw_step_({p}, {Tensor()}, {m}, {v}, {}), Catch::Contains("grad 0 is an undefined tensor"));
  REQUIRE_THROWS_WITH(ops::adamw_step_({p}, {g}, {m}, {v}, {.step = 0}), Catch::Contains("step must be >= 1"));
  REQUIRE_THROWS_WITH(ops::adamw_step_({p}, {g}, {m}, {v}, {.beta2 = 1.0}), Catch::Contains("betas must be in [0, 1)"));
  REQUIRE_THROWS_WITH(ops::adamw_step_({p}, {g}, {m}, {v}, {.lr = -1}), Catch::Contains("learning rate must be >= 0"));
  REQUIRE(p.to_vector() == std::vector<double>(6, 1.0));
}

// ============================== AdamW ==============================

TEST_CASE("AdamW has PyTorch's defaults", "[optim][adamw]") {
  AdamWOptions o;
  REQUIRE(o.lr == 1e-3);
  REQUIRE(o.beta1 == 0.9);
  REQUIRE(o.beta2 == 0.999);
  REQUIRE(o.eps == 1e-8);
  REQUIRE(o.weight_decay == 1e-2);
}

TEST_CASE("AdamW matches the f64 formula over several steps for several parameters", "[optim][adamw]") {
  Tensor w = param({3, 2}, 50), b = param({2}, 51);
  AdamRef rw(w.to_vector()), rb(b.to_vector());
  for (AdamRef* r : {&rw, &rb}) {
    r->lr = 0.03;
    r->wd = 0.2;
  }
  AdamW opt({{"w", w}, {"b", b}}, {.lr = 0.03, .weight_decay = 0.2});
  for (uint64_t t = 1; t <= 6; ++t) {
    Tensor gw = grad_for(w, t), gb = grad_for(b, t + 100);
    step_both(opt, w, rw, gw, b, rb, gb);
    test::require_close(w, rw.p, 1e-14, 1e-12);
    test::require_close(b, rb.p, 1e-14, 1e-12);
  }
  REQUIRE(opt.steps_taken() == 6);
}

TEST_CASE("AdamW skips parameters without a gradient and corrects each for its own steps", "[optim][adamw]") {
  Tensor a = param({4}, 60), b = param({4}, 61);
  const std::vector<double> b_before = b.to_vector();
  AdamRef ra(a.to_vector()), rb(b.to_vector());
  AdamW opt({{"a", a}, {"b", b}});
  // Step 1: only a has a gradient.
  Tensor g1 = grad_for(a, 1);
  a.set_grad(g1);
  opt.step();
  ra.step(g1.to_vector());
  REQUIRE(b.to_vector() == b_before);
  REQUIRE(opt.state_dict().count("exp_avg.b") == 0);
  // Step 2: both. b's first update uses bias correction for t = 1, a's for t = 2.
  Tensor g2a = grad_for(a, 2), g2b = grad_for(b, 3);
  step_both(opt, a, ra, g2a, b, rb, g2b);
  test::require_close(a, ra.p, 1e-14, 1e-12);
  test::require_close(b, rb.p, 1e-14, 1e-12);
  StateDict s = opt.state_dict();
  REQUIRE(s.at("step").item() == 2);
  REQUIRE(s.at("step.a").item() == 2);
  REQUIRE(s.at("step.b").item() == 1);
}

TEST_CASE("AdamW parameter groups override weight decay", "[optim][adamw]") {
  Tensor w = param({3}, 70), bias = param({3}, 71);
  AdamRef rw(w.to_vector()), rbias(bias.to_vector());
  rw.wd = 0.5;
  rbias.wd = 0;
  AdamW opt(std::vector<ParamGroup>{{{{"w", w}}, std::nullopt}, {{{"bias", bias}}, 0.0}}, {.weight_decay = 0.5});
  for (uint64_t t = 1; t <= 3; ++t) {
    Tensor gw = grad_for(w, t), gb = grad_for(bias, t + 9);
    step_both(opt, w, rw, gw, bias, rbias, gb);
  }
  test::require_close(w, rw.p, 1e-14, 1e-12);
  test::require_close(bias, rbias.p, 1e-14, 1e-12);
}

TEST_CASE("AdamW keeps f32 state for bf16 parameters", "[optim][adamw]") {
  Tensor p = ops::to_dtype(test::random({5}, 80), DType::bf16);
  AdamW opt({{"p", p}}, {.lr = 0.1});
  p.set_grad(ops::to_dtype(test::random({5}, 81), DType::bf16));
  const std::vector<double> before = p.to_vector();
  opt.step();
  REQUIRE(p.dtype() == DType::bf16);
  REQUIRE(p.to_vector() != before);
  REQUIRE(opt.state_dict().at("exp_avg.p").dtype() == DType::f32);
}

TEST_CASE("zero_grad drops every gradient; lr can be read and set", "[optim]") {
  Tensor a = param({2}, 90), b = param({2}, 91);
  AdamW opt({{"a", a}, {"b", b}}, {.lr = 0.5});
  a.set_grad(ones({2}, DType::f64));
  b.set_grad(ones({2}, DType::f64));
  opt.zero_grad();
  REQUIRE(!a.grad().defined());
  REQUIRE(!b.grad().defined());
  REQUIRE(opt.lr() == 0.5);
  opt.set_lr(0.25);
  REQUIRE(opt.lr() == 0.25);
  REQUIRE_THROWS_WITH(opt.set_lr(-1), Catch::Contains("AdamW: learning rate must be a finite number >= 0"));
  REQUIRE(opt.parameters().size() == 2);
  REQUIRE(opt.named_parameters()[1].first == "b");
}

// ============================== SGD ==============================

TEST_CASE("SGD with momentum by hand", "[optim][sgd]") {
  // p = 1, g = 1 each step, lr 0.1, momentum 0.9: buf 1 -> 1.9; p 0.9 -> 0.71.
  Tensor p = param({1}, 0);
  ops::fill_(p, 1.0);
  SGD opt({{"p", p}}, {.lr = 0.1, .momentum = 0.9});
  p.set_grad(ones({1}, DType::f64));
  opt.step();
  REQUIRE(p.item() == Approx(0.9).epsilon(1e-15));
  p.set_grad(ones({1}, DType::f64));
  opt.step();
  REQUIRE(p.item() == Approx(0.71).epsilon(1e-15));
  REQUIRE(opt.state_dict().at("momentum_buffer.p").item() == Approx(1.9).epsilon(1e-15));
}

TEST_CASE("SGD matches the f64 formula: plain, momentum, dampening, weight decay, nesterov", "[optim][sgd]") {
  const SGDOptions o = GENERATE(SGDOptions{.lr = 0.1}, SGDOptions{.lr = 0.05, .momentum = 0.9},
                                SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
                                SGDOptions{.lr = 0.02, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true});
  Tensor p = param({3, 3}, 100);
  SgdRef ref(p.to_vector());
  ref.lr = o.lr;
  ref.momentum = o.momentum;
  ref.dampening = o.dampening;
  ref.wd = o.weight_decay;
  ref.nesterov = o.nesterov;
  SGD opt({{"p", p}}, o);
  for (uint64_t t = 1; t <= 5; ++t) {
    Tensor g = grad_for(p, t);
    const std::vector<double> g_before = g.to_vector();
    p.set_grad(g);
    opt.step();
    ref.step(g_before);
    REQUIRE(p.grad().to_vector() == g_before);  // the gradient itself is never modified
    test::require_close(p, ref.p, 1e-14, 1e-12);
  }
}

TEST_CASE("SGD updates bf16 and strided parameters", "[optim][sgd]") {
  Tensor base = test::random({4, 3}, 110);
  Tensor p = test::strided(base);
  SgdRef ref(base.to_vector());
  ref.momentum = 0.5;
  SGD opt({{"p", p}}, {.lr = 0.1, .momentum = 0.5});
  for (uint64_t t = 1; t <= 3; ++t) {
    Tensor g = grad_for(p, t);
    p.set_grad(g);
    opt.step();
    ref.step(g.to_vector());
  }
  test::require_close(p, ref.p, 1e-14, 1e-12);

  Tensor h = ops::to_dtype(tensor({1.0, 2.0}), DType::bf16);
  SGD hopt({{"h", h}}, {.lr = 0.5});
  h.set_grad(ops::to_dtype(tensor({1.0, 1.0}), DType::bf16));
  hopt.step();
  REQUIRE(h.dtype() == DType::bf16);
  REQUIRE(h.to_vector() == std::vector<double>{0.5, 1.5});
}

// ============================== state dicts ==============================

namespace {

// Runs `steps` optimizer steps with the deterministic gradients of steps [first, first + steps).
template <class Opt>
void run_steps(Opt& opt, std::vector<Tensor> params, uint64_t first, uint64_t steps) {
  for (uint64_t t = first; t < first + steps; ++t) {
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(grad_for(params[i], t * 10 + i, params[i].dtype()));
    opt.step();
  }
}

template <class Opt, class Options>
void check_resume_is_bitwise(Options options, DType dtype) {
  Tensor w = param({4, 3}, 120, dtype), b = param({3}, 121, dtype);
  Opt opt({{"layer.w", w}, {"layer.b", b}}, options);
  run_steps(opt, {w, b}, 1, 3);

  // Snapshot: parameter values and optimizer state, as copies.
  Tensor w2 = ops::clone(w), b2 = ops::clone(b);
  StateDict saved = opt.state_dict();

  run_steps(opt, {w, b}, 4, 3);  // uninterrupted

  Opt resumed({{"layer.w", w2}, {"layer.b", b2}}, options);
  resumed.set_lr(123.0);  // must be restored from the state
  resumed.load_state_dict(saved);
  REQUIRE(resumed.lr() == opt.lr());
  REQUIRE(resumed.steps_taken() == 3);
  run_steps(resumed, {w2, b2}, 4, 3);

  REQUIRE(bitwise_equal(w, w2));
  REQUIRE(bitwise_equal(b, b2));
  StateDict a = opt.state_dict(), c = resumed.state_dict();
  REQUIRE(a.size() == c.size());
  for (const auto& [k, t] : a) REQUIRE(bitwise_equal(t, c.at(k)));
}

}  // namespace

TEST_CASE("AdamW state_dict round trip: resuming equals continuing, bitwise", "[optim][state]") {
  const DType dtype = GENERATE(DType::f32, DType::f64);
  check_resume_is_bitwise<AdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.1}, dtype);
}

TEST_CASE("SGD state_dict round trip: resuming equals continuing, bitwise", "[optim][state]") {
  check_resume_is_bitwise<SGD>(SGDOptions{.lr = 0.01, .momentum = 0.9, .weight_decay = 0.1}, DType::f32);
  check_resume_is_bitwise<SGD>(SGDOptions{.lr = 0.01}, DType::f32);
}

TEST_CASE("state_dict keys and contents", "[optim][state]") {
  Tensor w = param({2, 2}, 130);
  AdamW opt({{"blocks.0.w", w}}, {.lr = 0.25});
  StateDict fresh = opt.state_dict();
  REQUIRE(fresh.size() == 2);  // step and lr only: no state before the first update
  REQUIRE(fresh.at("step").dtype() == DType::i64);
  REQUIRE(fresh.at("step").item() == 0);
  REQUIRE(fresh.at("lr").item() == 0.25);
  run_steps(opt, {w}, 1, 2);
  StateDict s = opt.state_dict();
  REQUIRE(s.size() == 5);
  REQUIRE(s.at("exp_avg.blocks.0.w").shape() == Shape{2, 2});
  REQUIRE(s.at("exp_avg_sq.blocks.0.w").dtype() == DType::f64);
  REQUIRE(s.at("step.blocks.0.w").item() == 2);
  // The dict holds copies: changing it does not change the optimizer.
  ops::fill_(s.at("exp_avg.blocks.0.w"), 7.0);
  REQUIRE(opt.state_dict().at("exp_avg.blocks.0.w").to_vector() != std::vector<double>(4, 7.0));
}

TEST_CASE("load_state_dict rejects mismatched state and changes nothing", "[optim][state][errors]") {
  Tensor w = param({2, 3}, 140);
  AdamW opt({{"w", w}});
  run_steps(opt, {w}, 1, 1);
  const StateDict good = opt.state_dict();
  auto with = [&](const std::string& key, const Tensor& t) {
    StateDict s = good;
    s[key] = t;
    return s;
  };
  auto without = [&](const std::string& key) {
    StateDict s = good;
    s.erase(key);
    return s;
  };
  REQUIRE_THROWS_WITH(opt.load_state_dict(with("exp_avg.w", zeros({3, 2}))),
                      Catch::Contains("'exp_avg.w' has shape [3, 2] but parameter 'w' has shape [2, 3]"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(with("exp_avg.v", zeros({2, 3}))),
                      Catch::Contains("parameter 'v', which this optimizer does not have"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(with("momentum_buffer.w", zeros({2, 3}))),
                      Catch::Contains("unexpected key 'momentum_buffer.w'"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(with("nonsense", zeros({1}))), Catch::Contains("unexpected key 'nonsense'"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(without("exp_avg_sq.w")), Catch::Contains("missing 'exp_avg_sq.w'"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(without("step.w")), Catch::Contains("without 'step.w'"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(without("step")), Catch::Contains("missing 'step'"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(with("step", scalar(1.0, DType::f32))),
                      Catch::Contains("'step' must be a i64 scalar, got f32"));
  REQUIRE_THROWS_WITH(opt.load_state_dict(with("lr", scalar(-1.0, DType::f64))), Catch::Contains("learning rate"));
  // Nothing was applied by the failed loads.
  StateDict after = opt.state_dict();
  for (const auto& [k, t] : good) REQUIRE(bitwise_equal(t, after.at(k)));
  // SGD without momentum keeps no buffers, so an AdamW state is refused by key.
  Tensor u = param({2, 3}, 141);
  SGD sgd({{"w", u}});
  REQUIRE_THROWS_WITH(sgd.load_state_dict(good), Catch::Contains("SGD.load_state_dict: unexpected key 'exp_avg.w'"));
}

// ============================== construction errors ==============================

TEST_CASE("optimizers reject bad parameters and options", "[optim][errors]") {
  Tensor a = param({2}, 150), b = param({2}, 151);
  REQUIRE_THROWS_WITH(AdamW(std::vector<NamedTensor>{}), Catch::Contains("AdamW: got an empty parameter list"));
  REQUIRE_THROWS_WITH(AdamW({{"a", a}, {"a", b}}), Catch::Contains("two parameters are named 'a'"));
  REQUIRE_THROWS_WITH(SGD({{"a", a}, {"tied", a}}), Catch::Contains("'a' and 'tied' are the same tensor"));
  REQUIRE_THROWS_WITH(SGD({{"i", ones({2}, DType::i32)}}), Catch::Contains("parameter 'i' has dtype i32"));
  REQUIRE_THROWS_WITH(SGD({{"u", Tensor()}}), Catch::Contains("parameter 'u' is an undefined tensor"));
  REQUIRE_THROWS_WITH(SGD({{"", a}}), Catch::Contains("empty name"));
  REQUIRE_THROWS_WITH(AdamW({{"a", a}}, {.lr = -0.1}), Catch::Contains("AdamW: learning rate must be"));
  REQUIRE_THROWS_WITH(AdamW({{"a", a}}, {.beta1 = 1.5}), Catch::Contains("betas must be in [0, 1)"));
  REQUIRE_THROWS_WITH(AdamW({{"a", a}}, {.eps = -1}), Catch::Contains("eps must be"));
  REQUIRE_THROWS_WITH(SGD({{"a", a}}, {.momentum = -0.5}), Catch::Contains("SGD: momentum must be"));
  REQUIRE_THROWS_WITH(SGD({{"a", a}}, {.nesterov = true}), Catch::Contains("nesterov momentum needs momentum > 0"));
  REQUIRE_THROWS_WITH(SGD({{"a", a}}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                      Catch::Contains("dampening == 0"));
}

TEST_CASE("step rejects a gradient shaped unlike its parameter", "[optim][errors]") {
  Tensor a = param({2, 3}, 160);
  const std::vector<double> before = a.to_vector();
  AdamW opt({{"a", a}});
  force_grad(a, ones({3}, DType::f64));
  REQUIRE_THROWS_WITH(opt.step(), Catch::Contains("AdamW.step: parameter 'a' has shape [2, 3] but its gradient has shape [3]"));
  REQUIRE(a.to_vector() == before);
  REQUIRE(opt.steps_taken() == 0);
}

// ============================== clip_grad_norm ==============================

TEST_CASE("clip_grad_norm by hand: norm 13 clipped to 6.5", "[optim][clip]") {
  Tensor a = param({2}, 0), b = param({1}, 0), none = param({3}, 0);
  a.set_grad(tensor({3.0, 4.0}, DType::f64));
  b.set_grad(tensor({12.0}, DType::f64));
  const double norm = clip_grad_norm({a, b, none}, 6.5);
  REQUIRE(norm == Approx(13.0).epsilon(1e-15));
  const double scale = 6.5 / (13.0 + 1e-6);
  test::require_close(a.grad(), {3 * scale, 4 * scale}, 1e-15, 1e-14);
  test::require_close(b.grad(), {12 * scale}, 1e-15, 1e-14);
  REQUIRE(!none.grad().defined());
  // Now under the limit: returned, nothing scaled.
  const double again = clip_grad_norm({a, b}, 100.0);
  REQUIRE(again == Approx(6.5).epsilon(1e-6));
  test::require_close(a.grad(), {3 * scale, 4 * scale}, 1e-15, 1e-14);
}

TEST_CASE("clip_grad_norm of random f32, bf16 and strided gradients against an f64 loop", "[optim][clip]") {
  Tensor p1 = param({5, 4}, 170, DType::f32), p2 = param({7}, 171, DType::bf16), p3 = param({3, 6}, 172, DType::f32);
  p1.set_grad(test::random({5, 4}, 173, DType::f32, 3.0));
  p2.set_grad(test::random({7}, 174, DType::bf16, 3.0));
  Tensor strided_grad = test::strided(test::random({3, 6}, 175, DType::f32, 3.0));
  force_grad(p3, strided_grad);
  double sum = 0;
  std::vector<std::vector<double>> before;
  for (const Tensor& p : {p1, p2, p3}) {
    before.push_back(p.grad().to_vector());
    for (double x : before.back()) sum += x * x;
  }
  const double expected = std::sqrt(sum);
  const double norm = clip_grad_norm({p1, p2, p3}, 1.0);
  REQUIRE(norm == Approx(expected).epsilon(1e-12));
  const double scale = 1.0 / (expected + 1e-6);
  test::require_close(p1.grad(), scaled(before[0], scale), 1e-7, 1e-6);
  test::require_close(p2.grad(), scaled(before[1], scale), 1e-3, 1e-2);  // bf16 keeps 8 bits
  test::require_close(p3.grad(), scaled(before[2], scale), 1e-7, 1e-6);
}

TEST_CASE("clip_grad_norm leaves non-finite gradients alone and checks max_norm", "[optim][clip][errors]") {
  Tensor a = param({2}, 0);
  a.set_grad(tensor({INFINITY, 1.0}, DType::f64));
  REQUIRE(std::isinf(clip_grad_norm({a}, 1.0)));
  REQUIRE(a.grad().to_vector()[1] == 1.0);
  REQUIRE_THROWS_WITH(clip_grad_norm({a}, 0.0), Catch::Contains("clip_grad_norm: max_norm must be a finite number > 0"));
  REQUIRE_THROWS_WITH(clip_grad_norm({Tensor()}, 1.0), Catch::Contains("parameter 0 is an undefined tensor"));
  REQUIRE(clip_grad_norm({}, 1.0) == 0.0);
}

// ============================== CosineSchedule ==============================

TEST_CASE("CosineSchedule at its key steps", "[optim][schedule]") {
  const CosineSchedule s{.base_lr = 1.0, .warmup_steps = 10, .total_steps = 110, .min_lr = 0.1};
  REQUIRE(s.lr(0) == Approx(0.1).epsilon(1e-15));   // warm-up start: base / W
  REQUIRE(s.lr(4) == Approx(0.5).epsilon(1e-15));   // linear
  REQUIRE(s.lr(9) == Approx(1.0).epsilon(1e-15));   // warm-up end
  REQUIRE(s.lr(10) == Approx(1.0).epsilon(1e-15));  // decay starts at base_lr
  REQUIRE(s.lr(60) == Approx(0.55).epsilon(1e-15)); // midpoint: halfway between base and min
  REQUIRE(s.lr(35) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4))).epsilon(1e-14));
  REQUIRE(s.lr(110) == Approx(0.1).epsilon(1e-15));  // end
  REQUIRE(s.lr(1000) == Approx(0.1).epsilon(1e-15)); // after the end
  for (int64_t k = 10; k < 110; ++k) REQUIRE(s.lr(k + 1) <= s.lr(k));  // monotone decay

  const CosineSchedule no_warmup{.base_lr = 2.0, .warmup_steps = 0, .total_steps = 4, .min_lr = 0.0};
  REQUIRE(no_warmup.lr(0) == Approx(2.0));
  REQUIRE(no_warmup.lr(2) == Approx(1.0));
  REQUIRE(no_warmup.lr(4) == Approx(0.0).margin(1e-15));
}

TEST_CASE("CosineSchedule rejects inconsistent settings", "[optim][schedule][errors]") {
  REQUIRE_THROWS_WITH((CosineSchedule{.base_lr = 1, .warmup_steps = 10, .total_steps = 5}.lr(0)),
                      Catch::Contains("0 <= warmup_steps <= total_steps"));
  REQUIRE_THROWS_WITH((CosineSchedule{.base_lr = 0.1, .warmup_steps = 0, .total_steps = 5, .min_lr = 1}.lr(0)),
                      Catch::Contains("min_lr <= base_lr"));
  REQUIRE_THROWS_WITH((CosineSchedule{}.lr(-1)), Catch::Contains("step must be >= 0"));
}
