// A small CNN: tell horizontal bars from vertical ones in generated 8x8 images.
//
// Shows nn::Conv2d, MaxPool2d and Flatten (nn/conv.h) in an nn::Sequential, cross_entropy over class
// logits, and evaluation without a tape (NoGradGuard) on images the model never saw.
//
// Build and run it against an installed brigade (`meson install -C build`):
//   c++ -std=c++20 -O2 examples/cnn.cpp $(pkg-config --cflags --libs brigade) -o cnn && ./cnn
// or in the tree: ninja -C build examples/cnn && build/examples/cnn
// It exits 1 unless the loss falls below a tenth of where it started and the held-out accuracy
// reaches 95%.
#include <brigade.h>

#include <cstdio>

using namespace brigade;

namespace {

struct Images {
  Tensor x;       // [n, 1, 8, 8] f32: one bright bar on noise
  Tensor labels;  // [n] i64: 0 horizontal, 1 vertical
};

// Image i has a horizontal bar when i is even, a vertical one when odd; its row or column and the
// noise come from `gen`.
Images make_bars(int64_t n, Generator& gen) {
  const int64_t S = 8;
  Images out{randn({n, 1, S, S}, DType::f32, Device::cpu(), &gen) * 0.3, zeros({n}, DType::i64)};
  std::vector<double> where = uniform({n}, 0, double(S), DType::f64, Device::cpu(), &gen).to_vector();
  float* pixels = out.x.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const bool vertical = i % 2 == 1;
    const int64_t line = int64_t(where[size_t(i)]);
    for (int64_t k = 0; k < S; ++k) pixels[i * S * S + (vertical ? k * S + line : line * S + k)] += 1.0f;
    out.labels.data<int64_t>()[i] = vertical ? 1 : 0;
  }
  return out;
}

double accuracy(nn::Module& model, const Images& data) {
  NoGradGuard no_tape;  // evaluation records nothing
  std::vector<double> predicted = argmax(model(data.x), 1).to_vector(), truth = data.labels.to_vector();
  int64_t right = 0;
  for (size_t i = 0; i < truth.size(); ++i) right += predicted[i] == truth[i];
  return double(right) / double(truth.size());
}

}  // namespace

int main() {
  try {
    Generator gen(0);
    const nn::Init init{.generator = &gen};
    // [n, 1, 8, 8] -> conv 3x3 -> [n, 8, 8, 8] -> pool -> [n, 8, 4, 4] -> [n, 128] -> two logits
    nn::Sequential model{
        std::make_shared<nn::Conv2d>(1, 8, 3, nn::Conv2dOptions{.padding = 1, .init = init}),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(8 * 4 * 4, 2, nn::LinearOptions{.init = init}),
    };
    std::printf("%s", model.describe().c_str());

    const Images train = make_bars(128, gen), held_out = make_bars(128, gen);
    optim::AdamW opt(model.named_parameters(), {.lr = 1e-2});
    double first = 0, last = 0;
    for (int step = 0; step < 40; ++step) {
      Tape tape;
      Tensor loss = tape.record([&] { return cross_entropy(model(train.x), train.labels); });
      tape.backward(loss);
      opt.step();
      opt.zero_grad();
      last = loss.item();
      if (step == 0) first = last;
      if (step % 10 == 0) std::printf("step %2d  loss %.4f\n", step, last);
    }
    const double acc = accuracy(model, held_out);
    std::printf("loss %.4f -> %.4f, held-out accuracy %.1f%%\n", first, last, 100 * acc);
    return last < 0.1 * first && acc >= 0.95 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnn: %s\n", e.what());
    return 1;
  }
}
