#include "nn/norm.h"

#include <optional>
#include <sstream>

#include "autograd/autocast.h"
#include "autograd/functions.h"

namespace brigade::nn {
namespace {

void check_last_dim(const char* layer, const Tensor& x, int64_t dim) {
  BRIGADE_CHECK(x.dim() >= 1 && x.size(-1) == dim, layer, ": input shape ", shape_str(x.shape()),
                " does not end in dim=", dim);
}

std::string norm_details(int64_t dim, double eps) {
  std::ostringstream os;
  os << "dim=" << dim << ", eps=" << eps;
  return os.str();
}

}  // namespace

LayerNorm::LayerNorm(int64_t d, const LayerNormOptions& o) : dim(d), eps(o.eps) {
  BRIGADE_CHECK(d > 0, "LayerNorm: dim must be positive, got ", d);
  BRIGADE_CHECK(o.eps >= 0, "LayerNorm: eps must be non-negative, got ", o.eps);
  if (!o.affine) return;
  weight = register_parameter("weight", init::ones({d}, o.init));
  if (o.bias) bias = register_parameter("bias", init::zeros({d}, o.init));
}

std::string LayerNorm::details() const {
  return norm_details(dim, eps) + (weight.defined() ? "" : ", affine=false") +
         (weight.defined() && !bias.defined() ? ", bias=false" : "");
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_last_dim("LayerNorm", x, dim);
  return layer_norm(x, weight, bias, eps);
}

std::pair<Tensor, Tensor> LayerNorm::forward_add(const Tensor& x, const Tensor& residual) {
  check_last_dim("LayerNorm", x, dim);
  std::optional<Autocast> scope;  // not called through operator(): set this module's compute dtype here
  if (compute_dtype()) scope.emplace(*compute_dtype());
  return add_layer_norm(x, residual, weight, bias, eps);
}

RMSNorm::RMSNorm(int64_t d, const RMSNormOptions& o) : dim(d), eps(o.eps) {
  BRIGADE_CHECK(d > 0, "RMSNorm: dim must be positive, got ", d);
  BRIGADE_CHECK(o.eps >= 0, "RMSNorm: eps must be non-negative, got ", o.eps);
  weight = register_parameter("weight", init::ones({d}, o.init));
}

std::string RMSNorm::details() const { return norm_details(dim, eps); }

Tensor RMSNorm::forward(const Tensor& x) {
  check_last_dim("RMSNorm", x, dim);
  return rms_norm(x, weight, eps);
}

}  // namespace brigade::nn
