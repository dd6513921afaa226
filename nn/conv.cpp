#include "nn/conv.h"

#include <cmath>

#include "autograd/functions.h"

namespace brigade::nn {
namespace {

std::string window_details(int64_t kernel, int64_t stride, int64_t padding) {
  return "kernel=" + std::to_string(kernel) + ", stride=" + std::to_string(stride) +
         ", padding=" + std::to_string(padding);
}

void check_window(const char* layer, int64_t kernel, int64_t stride, int64_t padding) {
  BRIGADE_CHECK(kernel > 0 && (stride > 0 || stride == -1) && padding >= 0, layer, ": invalid kernel=", kernel,
                ", stride=", stride, ", padding=", padding);
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, const Conv2dOptions& o)
    : in_channels(in), out_channels(out), kernel(k), stride(o.stride), padding(o.padding) {
  const int64_t s = o.stride, pad = o.padding;
  const bool with_bias = o.bias;
  const Init& init = o.init;
  BRIGADE_CHECK(in > 0 && out > 0, "Conv2d: channel counts must be positive, got in=", in, ", out=", out);
  BRIGADE_CHECK(k > 0 && s > 0 && pad >= 0, "Conv2d: invalid kernel=", k, ", stride=", s, ", padding=", pad);
  Shape shape{out, in, k, k};
  double fan_in = double(in * k * k);
  const Init named = init.at("weight");
  weight = register_parameter("weight", init.std > 0 ? init::normal(shape, init.std, named)
                                                     : init::uniform(shape, 1.0 / std::sqrt(fan_in), named));
  if (with_bias) bias = register_parameter("bias", init::zeros({out}, init));
}

std::string Conv2d::details() const {
  return "in=" + std::to_string(in_channels) + ", out=" + std::to_string(out_channels) + ", " +
         window_details(kernel, stride, padding) + ", bias=" + (bias.defined() ? "true" : "false");
}

Tensor Conv2d::forward(const Tensor& x) {
  BRIGADE_CHECK(x.dim() == 4 && x.size(1) == in_channels, "Conv2d: expected input [N, ", in_channels,
                ", H, W], got ", shape_str(x.shape()));
  return conv2d(x, weight, bias, stride, padding);
}

MaxPool2d::MaxPool2d(int64_t k, const Pool2dOptions& o)
    : kernel(k), stride(o.stride == -1 ? k : o.stride), padding(o.padding) {
  check_window("MaxPool2d", k, o.stride, o.padding);
}
std::string MaxPool2d::details() const { return window_details(kernel, stride, padding); }
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel, stride, padding); }

AvgPool2d::AvgPool2d(int64_t k, const Pool2dOptions& o)
    : kernel(k), stride(o.stride == -1 ? k : o.stride), padding(o.padding) {
  check_window("AvgPool2d", k, o.stride, o.padding);
}
std::string AvgPool2d::details() const { return window_details(kernel, stride, padding); }
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, kernel, stride, padding); }

Flatten::Flatten(int64_t start, int64_t end) : start_dim(start), end_dim(end) {}

std::string Flatten::details() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Tensor Flatten::forward(const Tensor& x) {
  int64_t start = wrap_dim(start_dim, x.dim(), "Flatten");
  int64_t end = wrap_dim(end_dim, x.dim(), "Flatten");
  BRIGADE_CHECK(start <= end, "Flatten: start_dim ", start_dim, " comes after end_dim ", end_dim, " for shape ",
                shape_str(x.shape()));
  Shape shape(x.shape().begin(), x.shape().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= x.size(d);
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
  return x.reshape(shape);
}

}  // namespace brigade::nn
