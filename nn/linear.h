// Linear: y = x W^T + b, the fully connected layer.
#pragma once

#include "kernels/params.h"
#include "nn/init.h"
#include "nn/module.h"

namespace brigade::nn {

struct LinearOptions {
  bool bias = true;  // a bias [out], zeros
  Init init = {};    // weights N(0, init.std) when init.std > 0, else U(-1/sqrt(in), 1/sqrt(in))
};

class Linear : public Module {
 public:
  // weight [out, in] (PyTorch's layout: one row per output feature).
  //   nn::Linear(64, 10, {.bias = false, .init = init})
  Linear(int64_t in_features, int64_t out_features, const LinearOptions& options = {});

  std::string name() const override { return "Linear"; }
  std::string details() const override;
  // x [..., in] -> [..., out]
  Tensor forward(const Tensor& x) override;
  // act(x W^T + b) with the activation fused into the GEMM's epilogue (brigade::linear): the bits of
  // forward(x) followed by the activation, one pass over the output instead of two.
  Tensor forward(const Tensor& x, Activation act);

  const int64_t in_features, out_features;
  Tensor weight;
  Tensor bias;  // undefined without bias
};

}  // namespace brigade::nn
