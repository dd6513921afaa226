// Layers for small CNNs (NCHW): Conv2d, MaxPool2d, AvgPool2d and Flatten.
#pragma once

#include "nn/init.h"
#include "nn/module.h"

namespace brigade::nn {

struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;  // zeros on every side
  bool bias = true;     // a bias [out], zeros
  Init init = {};       // weights N(0, init.std) when init.std > 0, else U(-1/sqrt(in*k*k), 1/sqrt(in*k*k))
};

// x [N, in, H, W] -> [N, out, H', W'] with a square kernel, stride and symmetric zero padding.
//   nn::Conv2d(1, 8, 3, {.padding = 1, .init = init})
class Conv2d : public Module {
 public:
  // weight [out, in, k, k].
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, const Conv2dOptions& options = {});

  std::string name() const override { return "Conv2d"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;

  const int64_t in_channels, out_channels, kernel, stride, padding;
  Tensor weight;
  Tensor bias;  // undefined without bias
};

// The windows of MaxPool2d and AvgPool2d beyond their size.
struct Pool2dOptions {
  int64_t stride = -1;  // -1: the kernel size (windows side by side)
  int64_t padding = 0;
};

// Max over each kernel x kernel window.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, const Pool2dOptions& options = {});
  std::string name() const override { return "MaxPool2d"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;
  const int64_t kernel, stride, padding;
};

// Mean over each window; padded positions count in the divisor.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel, const Pool2dOptions& options = {});
  std::string name() const override { return "AvgPool2d"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;
  const int64_t kernel, stride, padding;
};

// Merges dims start_dim..end_dim into one: [N, C, H, W] -> [N, C*H*W] by default.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  std::string name() const override { return "Flatten"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;
  const int64_t start_dim, end_dim;
};

}  // namespace brigade::nn
