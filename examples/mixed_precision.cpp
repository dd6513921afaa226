// Mixed precision: a model that computes in bf16 while its weights — the master weights — stay f32,
// trained side by side with the same model in f32 from the same initial weights.
//
// set_compute_dtype(DType::bf16) (nn/module.h) leaves the parameters alone: calling the model runs its
// forward under Autocast(bf16) (autograd/autocast.h), where every differentiable function takes its
// f32 inputs — the input batch and the parameters — in bf16 through a differentiable to_dtype. So
// activations are bf16 and gradients come back to the f32 parameters in f32, where AdamW updates
// them; the layers, the hand-written Gate among them, contain no casts. The loss is taken in f32,
// outside the model. See docs/nn.md, "Mixed precision". bf16 keeps 8 significant bits, so the two
// runs are close, not equal: after 150 steps
// the bf16 run's loss must be within 2% of the f32 run's (they end about 0.1% apart), and the f32 run
// below a tenth of where it started.
//
// Build and run it against an installed brigade (`meson install -C build`):
//   c++ -std=c++20 -O2 examples/mixed_precision.cpp $(pkg-config --cflags --libs brigade) -o mixed_precision
//   ./mixed_precision
// or in the tree: ninja -C build examples/mixed_precision && build/examples/mixed_precision
// It exits 1 if the losses part, or if a weight or its gradient is not f32 or an activation not bf16.
#include <brigade.h>

#include <cmath>
#include <cstdio>

using namespace brigade;

namespace {

// A layer of our own: a learned gate per feature. Its f32 parameter meets bf16 activations, and
// autocast converts it; nothing here mentions a dtype.
struct Gate : nn::Module {
  Tensor logit;
  explicit Gate(int64_t n) { logit = register_parameter("logit", zeros({n})); }
  std::string name() const override { return "Gate"; }
  Tensor forward(const Tensor& x) override { return x * sigmoid(logit); }
};

struct MLP : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<Gate> gate;
  explicit MLP(Generator& gen) {
    const nn::Init init{.generator = &gen};
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(8, 64, nn::LinearOptions{.init = init}));
    gate = register_module("gate", std::make_shared<Gate>(64));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(64, 1, nn::LinearOptions{.init = init}));
  }
  std::string name() const override { return "MLP"; }
  Tensor forward(const Tensor& x) override { return (*fc2)((*gate)(gelu((*fc1)(x)))); }
};

// The loss in f32 whatever the model computes in: the prediction is converted first.
Tensor mse(nn::Module& model, const Tensor& x, const Tensor& y) {
  Tensor err = to_dtype(model(x), DType::f32) - y;
  return mean(err * err);
}

bool all_of_dtype(const std::vector<Tensor>& tensors, DType dtype) {
  for (const Tensor& t : tensors)
    if (!t.defined() || t.dtype() != dtype) return false;
  return true;
}

}  // namespace

int main() {
  try {
    Generator data_gen(1);
    Tensor x = randn({256, 8}, DType::f32, Device::cpu(), &data_gen);
    Tensor y = tanh(sum(x.slice(1, 0, 4), {1}, true)) - 0.5 * x.slice(1, 4, 5);

    Generator gen_a(0), gen_b(0);  // one seed: the two models start with the same weights
    MLP full(gen_a), mixed(gen_b);
    mixed.set_compute_dtype(DType::bf16);

    optim::AdamW opt_full(full.named_parameters(), {.lr = 1e-2});
    optim::AdamW opt_mixed(mixed.named_parameters(), {.lr = 1e-2});
    bool dtypes_ok = true;
    double first = 0, loss_full = 0, loss_mixed = 0;
    for (int step = 0; step < 150; ++step) {
      Tape tape_full, tape_mixed;
      Tensor lf = tape_full.record([&] { return mse(full, x, y); });
      Tensor lm = tape_mixed.record([&] { return mse(mixed, x, y); });
      tape_full.backward(lf);
      tape_mixed.backward(lm);
      if (step == 0) {
        std::vector<Tensor> grads;
        for (const Tensor& p : mixed.parameters()) grads.push_back(p.grad());
        NoGradGuard no_tape;
        const bool activations_bf16 = mixed(x).dtype() == DType::bf16;
        dtypes_ok = activations_bf16 && all_of_dtype(mixed.parameters(), DType::f32) && all_of_dtype(grads, DType::f32);
        std::printf("bf16 activations: %s; weights and their gradients f32: %s\n", activations_bf16 ? "yes" : "NO",
                    dtypes_ok ? "yes" : "NO");
        first = lf.item();
      }
      opt_full.step();
      opt_mixed.step();
      opt_full.zero_grad();
      opt_mixed.zero_grad();
      loss_full = lf.item();
      loss_mixed = lm.item();
      if (step % 30 == 0) std::printf("step %3d  loss f32 %.5f   bf16 compute %.5f\n", step, loss_full, loss_mixed);
    }
    const double gap = std::abs(loss_mixed - loss_full) / loss_full;
    std::printf("final loss f32 %.5f, bf16 compute %.5f: %.1f%% apart (allowed 2%%), from %.5f\n", loss_full,
                loss_mixed, 100 * gap, first);
    return dtypes_ok && gap <= 0.02 && loss_full < 0.1 * first ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixed_precision: %s\n", e.what());
    return 1;
  }
}
