// Normalisation over the last dim: LayerNorm and RMSNorm.
#pragma once

#include <utility>

#include "nn/init.h"
#include "nn/module.h"

namespace brigade::nn {

struct LayerNormOptions {
  double eps = 1e-5;
  bool affine = true;  // false: no weight and no bias
  bool bias = true;    // false: a weight only (as GPTConfig.bias=false uses)
  Init init = {};
};

// y = (x - mean) / sqrt(var + eps) * weight + bias, over the last dim (of size `dim`).
//   nn::LayerNorm(768, {.eps = 1e-6, .bias = false})
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, const LayerNormOptions& options = {});

  std::string name() const override { return "LayerNorm"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;
  // {h, forward(h)} with h = x + residual, fused into one kernel each way (brigade::add_layer_norm):
  // a pre-LN block's residual add and its next norm.
  std::pair<Tensor, Tensor> forward_add(const Tensor& x, const Tensor& residual);

  const int64_t dim;
  const double eps;
  Tensor weight;  // [dim], ones; undefined without affine
  Tensor bias;    // [dim], zeros; undefined without affine or bias
};

struct RMSNormOptions {
  double eps = 1e-6;
  Init init = {};
};

// y = x / sqrt(mean(x^2) + eps) * weight, over the last dim: LayerNorm without centring or bias.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, const RMSNormOptions& options = {});

  std::string name() const override { return "RMSNorm"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;

  const int64_t dim;
  const double eps;
  Tensor weight;  // [dim], ones
};

}  // namespace brigade::nn
