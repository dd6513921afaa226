// Built by tests/install/run.sh against the *installed* brigade (headers under include/brigade,
// flags from brigade.pc), exactly as a user's project would be: a custom two-layer MLP, one forward,
// one backward, one AdamW step — and the loss must go down.
#include <brigade.h>  // the whole API: core, ops, autograd, nn, optim

#include <cstdio>
#include <memory>

using namespace brigade;

// A user-defined model: register the layers, write forward.
struct MLP : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  MLP(int64_t in, int64_t hidden, int64_t out, Generator& gen) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden, nn::LinearOptions{.init = {.generator = &gen}}));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, out, nn::LinearOptions{.init = {.generator = &gen}}));
  }
  std::string name() const override { return "MLP"; }
  Tensor forward(const Tensor& x) override { return (*fc2)(relu((*fc1)(x))); }
};

int main() {
  try {
    Generator gen(0);
    MLP model(4, 16, 1, gen);
    Tensor x = randn({32, 4}, DType::f32, Device::cpu(), &gen);
    Tensor y = sum(x, {1}, /*keepdim=*/true) * 0.5;  // a target the MLP can fit
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions{.lr = 1e-3});

    auto loss_of = [&] {
      Tensor diff = model(x) - y;
      return mean(diff * diff);
    };
    Tape tape;
    Tensor loss;
    {
      TapeGuard recording(tape);
      loss = loss_of();
    }
    tape.backward(loss);
    opt.step();
    double before = loss.item();
    double after = loss_of().item();

    std::printf("%s\nloss %.6f -> %.6f after one AdamW step\n", model.describe().c_str(), before, after);
    if (!(after < before)) {
      std::fprintf(stderr, "install test: the loss did not decrease\n");
      return 1;
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "install test: %s\n", e.what());
    return 1;
  }
}
