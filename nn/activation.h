// Parameter-free layers: activations and dropout, as modules so they can sit in a Sequential.
#pragma once

#include "nn/module.h"

namespace brigade::nn {

class ReLU : public Module {
 public:
  std::string name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x) override;
};

// The tanh approximation, as in GPT-2.
class GELU : public Module {
 public:
  std::string name() const override { return "GELU"; }
  Tensor forward(const Tensor& x) override;
};

// x * sigmoid(x), a.k.a. swish.
class SiLU : public Module {
 public:
  std::string name() const override { return "SiLU"; }
  Tensor forward(const Tensor& x) override;
};

// In training mode zeroes each element with probability p and scales the rest by 1 / (1 - p);
// in eval mode (and for p = 0) it is the identity. The mask's randomness comes from
// default_generator(), so manual_seed makes a run reproducible.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);

  std::string name() const override { return "Dropout"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;

  const double p;
};

}  // namespace brigade::nn
