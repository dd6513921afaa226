#include "nn/linear.h"

#include <cmath>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/functions.h"

namespace brigade::nn {

Linear::Linear(int64_t in, int64_t out, const LinearOptions& options) : in_features(in), out_features(out) {
  const Init& init = options.init;
  const bool with_bias = options.bias;
  BRIGADE_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in=", in, ", out=", out);
  const Init named = init.at("weight");
  weight = register_parameter("weight", init.std > 0 ? init::normal({out, in}, init.std, named)
                                                     : init::uniform({out, in}, 1.0 / std::sqrt(double(in)), named));
  if (with_bias) bias = register_parameter("bias", init::zeros({out}, init));
}

std::string Linear::details() const {
  return "in=" + std::to_string(in_features) + ", out=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

Tensor Linear::forward(const Tensor& x) { return forward(x, Activation::none); }

Tensor Linear::forward(const Tensor& x, Activation act) {
  // Called directly (MLP fuses its GELU this way), not through operator(): this module's compute
  // dtype must still be in force, as operator() would set it.
  std::optional<Autocast> scope;
  if (compute_dtype()) scope.emplace(*compute_dtype());
  BRIGADE_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: input shape ", shape_str(x.shape()),
                " does not end in in_features=", in_features);
  // One tape node (see autograd/functions/linear.cpp): W^T is read through its strides, no copy,
  // the bias and activation ride in the GEMM's epilogue, and the weight gradient stays separable
  // from the input gradient.
  return linear(x, weight, bias, act);
}

}  // namespace brigade::nn
