// A small MLP with a skip connection, for the pipeline tests: five layers, layer 1 stashes its input
// (pipeline::stash), layer 3 adds it back (pipeline::pop). Cut so that layers 1 and 3 sit on
// different stages, the stashed tensor travels with the activations across the stages between.
#pragma once

#include <memory>

#include "brigade.h"

namespace test {

using namespace brigade;

struct Stasher : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  explicit Stasher(const nn::Init& init) { fc = register_module("fc", std::make_shared<nn::Linear>(6, 6, nn::LinearOptions{.init = init})); }
  Tensor forward(const Tensor& x) override {
    pipeline::stash("early", x);
    return tanh((*fc)(x));
  }
};

struct Popper : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  explicit Popper(const nn::Init& init) { fc = register_module("fc", std::make_shared<nn::Linear>(6, 6, nn::LinearOptions{.init = init})); }
  Tensor forward(const Tensor& x) override { return (*fc)(x + pipeline::pop("early")); }
};

struct Dense : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  Dense(int64_t in, int64_t out, const nn::Init& init) {
    fc = register_module("fc", std::make_shared<nn::Linear>(in, out, nn::LinearOptions{.init = init}));
  }
  Tensor forward(const Tensor& x) override { return tanh((*fc)(x)); }
};

// [N, 4] -> [N, 3]; every call builds the same weights, on `device`.
inline pipeline::Layers skip_model(Device device = Device::cpu()) {
  Generator generator(5);
  nn::Init init;
  init.generator = &generator;
  init.device = device;
  return {std::make_shared<Dense>(4, 6, init), std::make_shared<Stasher>(init), std::make_shared<Dense>(6, 6, init),
          std::make_shared<Popper>(init), std::make_shared<Dense>(6, 3, init)};
}

inline Tensor mse(const Tensor& y, const Tensor& target) {
  Tensor d = y - target;
  return mean(d * d);
}

}  // namespace test
