// The optimizer's multi-tensor launches on a GPU against the per-tensor paths they replace:
// ops::sum_of_squares and ops::clip_by_norm_ (kernels/cuda/grad_norm.cu) give the bits of the
// per-tensor composition (to f64, square, sum, add up in order; scale_ each), and one AdamW call over
// a list gives the bits of one call per tensor; the sums against an f64 loop too. And a whole
// training step captured as one CUDA graph (optim/captured_step.h) against the same steps run
// eagerly, bit for bit. Run by tests/gpu_main.cpp, which skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "kernels/optimizer_ops.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "optim/captured_step.h"
#include "optim/clip_grad.h"
#include "tiny_gpt2.h"

using namespace brigade;

namespace {

const Device kGpu = Device::cuda(0);

Tensor random_on_gpu(const Shape& shape, DType dtype, uint64_t seed, double scale) {
  Generator gen(seed);
  return ops::to_dtype(ops::scale_shift(randn(shape, DType::f64, Device::cpu(), &gen), scale, 0), dtype).to(kGpu);
}

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to_vector(); }

// The bits of a tensor's elements, as f64 (every dtype here widens to f64 exactly), for == checks.
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

// Gradients of many sizes and every floating dtype: more tensors than one launch's table (48), and
// tensors long enough for a sum in several chunks (over 2048 elements) and in more than a warp has lanes (over 32 * 1024).
std::vector<Tensor> gradients(double scale) {
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f64, DType::f16};
  std::vector<Tensor> g;
  for (int i = 0; i < 53; ++i) {
    const int64_t n = i == 7 ? 70001 : i % 5 == 0 ? 3000 + 97 * i : 1 + 13 * i;
    g.push_back(random_on_gpu({n}, dtypes[i % 4], 100 + uint64_t(i), scale));
  }
  return g;
}

// The per-tensor composition optim::clip_grad_norm used before the multi-tensor kernels: each
// tensor's squares summed on the device, the sums added on the host in order.
double per_tensor_sum_of_squares(const std::vector<Tensor>& tensors) {
  double total = 0;
  for (const Tensor& t : tensors) {
    const Tensor t64 = ops::to_dtype(t, DType::f64);
    total += ops::sum(ops::binary(ops::BinaryOp::mul, t64, t64), {}, false).item();
  }
  return total;
}

std::vector<Tensor> clones(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> c;
  for (const Tensor& t : tensors) c.push_back(ops::clone(t));
  return c;
}

}  // namespace

TEST_CASE("gpu sum_of_squares: the multi-tensor kernels give the per-tensor composition's bits",
          "[gpu][optim][clip]") {
  const std::vector<Tensor> g = gradients(3.0);
  const double expected = per_tensor_sum_of_squares(g);
  const double got = ops::sum_of_squares(g).item();
  CHECK(std::memcmp(&got, &expected, sizeof(double)) == 0);
  INFO("fused " << got << ", per tensor " << expected);
  // And against an f64 loop on the host (a different order: equal to rounding).
  double loop = 0;
  for (const Tensor& t : g)
    for (double x : values(t)) loop += x * x;
  CHECK(got == Approx(loop).epsilon(1e-12));
  // An empty list sums to 0; a strided tensor takes the composed path, with the same bits.
  CHECK(ops::sum_of_squares({}).item() == 0.0);
  const Tensor wide = random_on_gpu({64, 40}, DType::f32, 7, 1.0);
  const std::vector<Tensor> strided = {g[1], wide.transpose(0, 1), g[2]};
  const double s = ops::sum_of_squares(strided).item(), s_expected = per_tensor_sum_of_squares(strided);
  CHECK(std::memcmp(&s, &s_expected, sizeof(double)) == 0);
}

TEST_CASE("gpu clip_grad_norm: the multi-tensor clipping gives scale_'s bits, decided on the device",
          "[gpu][optim][clip]") {
  const std::vector<Tensor> g = gradients(3.0);
  const std::vector<Tensor> before = clones(g);
  const double sum = per_tensor_sum_of_squares(g);
  const double norm = std::sqrt(sum);
  const double factor = 10.0 / (norm + 1e-6);
  REQUIRE(factor < 1);  // the case clips
  std::vector<Tensor> expected = clones(g);
  for (const Tensor& t : expected) ops::scale_(t, factor);

  std::vector<Tensor> params;
  for (const Tensor& t : g) {
    Tensor p = zeros(t.shape(), t.dtype(), kGpu);
    p.set_grad(t);
    params.push_back(p);
  }
  const double got = optim::clip_grad_norm(params, 10.0);
  CHECK(std::memcmp(&got, &norm, sizeof(double)) == 0);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("gradient " << i << " (" << dtype_name(g[i].dtype()) << ", " << g[i].numel() << " elements)");
    CHECK(same_bits(params[i].grad(), expected[i]));
  }
  // f64 reference for one of them: before * factor.
  const std::vector<double> b = values(before[2]), a = values(params[2].grad());  // f64
  for (size_t k = 0; k < b.size(); ++k) CHECK(a[k] == Approx(b[k] * factor).epsilon(1e-15));

  // Under the limit: nothing changes. The device-side variant returns the same norm, no wait.
  const std::vector<Tensor> clipped = clones(g);
  const Tensor on_device = optim::clip_grad_norm_on_device(params, 1e6);
  CHECK(on_device.device() == kGpu);
  CHECK(on_device.item() == Approx(10.0).epsilon(1e-3));  // the clipped gradients, rounded to their dtypes
  for (size_t i = 0; i < g.size(); ++i) CHECK(same_bits(params[i].grad(), clipped[i]));
}

TEST_CASE("gpu clip_grad_norm: a non-finite gradient leaves every gradient as it was", "[gpu][optim][clip]") {
  std::vector<Tensor> g = gradients(1.0);
  ops::copy_(g[5].slice(0, 2, 3), full({1}, INFINITY, g[5].dtype(), kGpu));
  const std::vector<Tensor> before = clones(g);
  std::vector<Tensor> params;
  for (const Tensor& t : g) {
    Tensor p = zeros(t.shape(), t.dtype(), kGpu);
    p.set_grad(t);
    params.push_back(p);
  }
  CHECK(std::isinf(optim::clip_grad_norm(params, 0.1)));
  for (size_t i = 0; i < g.size(); ++i) CHECK(same_bits(params[i].grad(), before[i]));
  // Bad input is named.
  CHECK_THROWS_WITH(ops::clip_by_norm_(g, zeros({2}, DType::f64, kGpu), 1.0),
                    Catch::Contains("sum_of_squares must be one f64 value"));
  CHECK_THROWS_WITH(ops::sum_of_squares({g[0], zeros({2}, DType::f32, Device::cpu())}),
                    Catch::Contains("tensors on different devices"));
}

TEST_CASE("gpu adamw_step_: one call over a list gives the bits of one call per tensor", "[gpu][optim][adamw]") {
  const std::vector<Tensor> g = gradients(0.1);
  std::vector<Tensor> p_list, m_list, v_list;
  for (size_t i = 0; i < g.size(); ++i) {
    const DType state = g[i].dtype() == DType::f64 ? DType::f64 : DType::f32;
    p_list.push_back(random_on_gpu(g[i].shape(), g[i].dtype(), 500 + i, 1.0));
    m_list.push_back(zeros(g[i].shape(), state, kGpu));
    v_list.push_back(zeros(g[i].shape(), state, kGpu));
  }
  std::vector<Tensor> p_one = clones(p_list), m_one = clones(m_list), v_one = clones(v_list);
  ops::AdamWParams hp{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 1};
  for (int64_t step = 1; step <= 2; ++step) {
    hp.step = step;
    ops::adamw_step_(p_list, g, m_list, v_list, hp);
    for (size_t i = 0; i < g.size(); ++i) ops::adamw_step_({p_one[i]}, {g[i]}, {m_one[i]}, {v_one[i]}, hp);
  }
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("parameter " << i << " (" << dtype_name(g[i].dtype()) << ")");
    CHECK(same_bits(p_list[i], p_one[i]));
    CHECK(same_bits(m_list[i], m_one[i]));
    CHECK(same_bits(v_list[i], v_one[i]));
  }
}

// ---- a whole training step as one CUDA graph ----

TEST_CASE("gpu CapturedStep: a whole bf16 GPT step replayed as one graph trains to the eager step's bits",
          "[gpu][optim][graphs]") {
  constexpr int kSteps = 4;
  constexpr double kClip = 0.5;  // below the gradients' norm: every step clips
    const auto lr_at = [](int step) { return 1e-2 / (1 + step); };  // a schedule: the graph must not freeze it

  // Eager: the per-step host path (the norm read back, the coefficients as kernel arguments).
  nn::GPT eager(test::tiny_gpt2(2, kGpu));
  optim::AdamW eager_opt(eager.named_parameters(), optim::AdamWOptions{.lr = 1e-2});
  std::vector<double> eager_losses, eager_norms;
  for (int i = 0; i < kSteps; ++i) {
    const Tensor idx = test::tiny_tokens(10 + uint64_t(i), kGpu), targets = test::tiny_tokens(20 + uint64_t(i), kGpu);
    eager_opt.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return eager.loss(idx, targets); });
    tape.backward(loss);
    eager_norms.push_back(optim::clip_grad_norm(eager_opt.parameters(), kClip));
    eager_opt.set_lr(lr_at(i));
    eager_opt.step();
    eager_losses.push_back(loss.item());
  }

  // Captured: step 0 eager (through the same function), then capture + replays on new inputs.
  nn::GPT graphed(test::tiny_gpt2(2, kGpu));
  optim::AdamW opt(graphed.named_parameters(), optim::AdamWOptions{.lr = 1e-2});
  opt.set_capturable(true);
  const Tensor idx = test::tiny_tokens(10, kGpu), targets = test::tiny_tokens(20, kGpu);
  Tensor norm;
  const auto step = [&] {
    opt.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return graphed.loss(idx, targets); });
    tape.backward(loss);
    norm = optim::clip_grad_norm_on_device(opt.parameters(), kClip);
    opt.step();
    return loss.detach();
  };
  opt.set_lr(lr_at(0));
  std::vector<double> losses = {step().item()}, norms = {norm.item()};
  optim::CapturedStep captured(opt, step);
  for (int i = 1; i < kSteps; ++i) {
    ops::copy_(idx, test::tiny_tokens(10 + uint64_t(i), kGpu));
    ops::copy_(targets, test::tiny_tokens(20 + uint64_t(i), kGpu));
    opt.set_lr(lr_at(i));
    losses.push_back(captured.run().item());
    norms.push_back(norm.item());  // since the capture: the graph's own tensor, rewritten by each replay
  }
  CHECK(captured.graph().operations() > 0);
  CHECK(opt.steps_taken() == kSteps);
  CHECK(losses == eager_losses);
  CHECK(norms == eager_norms);
  const auto a = eager.named_parameters(), b = graphed.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(same_bits(a[i].second, b[i].second));
  }
}

TEST_CASE("gpu CapturedStep: what cannot be captured says why", "[gpu][optim][graphs]") {
  nn::GPT model(test::tiny_gpt2(1, kGpu));
  const Tensor idx = test::tiny_tokens(1, kGpu), targets = test::tiny_tokens(2, kGpu);
  const auto forward_backward = [&](optim::AdamW& opt) {
    opt.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return model.loss(idx, targets); });
    tape.backward(loss);
    return loss.detach();
  };
  // Not capturable: the optimizer refuses to be recorded.
  optim::AdamW plain(model.named_parameters());
  (void)forward_backward(plain);
  plain.step();
  optim::CapturedStep refused(plain, [&] {
    const Tensor loss = forward_backward(plain);
    plain.step();
    return loss;
  });
  CHECK_THROWS_WITH(refused.run(), Catch::Contains("an optimizer step cannot be recorded in a graph"));
  // Capturable, but no eager step first: no state, no staged coefficients.
  optim::AdamW cold(model.named_parameters());
  cold.set_capturable(true);
  optim::CapturedStep too_soon(cold, [&] {
    const Tensor loss = forward_backward(cold);
    cold.step();
    return loss;
  });
  CHECK_THROWS_WITH(too_soon.run(), Catch::Contains("run one step eagerly before the capture"));
  // A step that never updates: nothing to replay.
  optim::AdamW idle(model.named_parameters());
  idle.set_capturable(true);
  (void)forward_backward(idle);
  idle.step();
  optim::CapturedStep no_update(idle, [&] { return forward_backward(idle); });
  CHECK_THROWS_WITH(no_update.run(), Catch::Contains("no step of this optimizer was captured"));
  CHECK_THROWS_WITH(optim::AdamW(nn::GPT(nn::GPTConfig{.n_layer = 1}).named_parameters()).set_capturable(true),
                    Catch::Contains("needs every parameter on a GPU"));
}
