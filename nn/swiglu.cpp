#include "nn/swiglu.h"

#include "autograd/functions.h"

namespace brigade::nn {

SwiGLU::SwiGLU(const SwiGLUOptions& o) : options(o) {
  BRIGADE_CHECK(o.dim > 0 && o.hidden > 0, "SwiGLU: dim and hidden must be positive, got dim=", o.dim,
                ", hidden=", o.hidden);
  gate = register_module("gate", std::make_shared<Linear>(o.dim, o.hidden, LinearOptions{.bias = o.bias, .init = o.init.at("gate")}));
  up = register_module("up", std::make_shared<Linear>(o.dim, o.hidden, LinearOptions{.bias = o.bias, .init = o.init.at("up")}));
  down = register_module("down", std::make_shared<Linear>(o.hidden, o.dim, LinearOptions{.bias = o.bias, .init = o.init.residual().at("down")}));
}

std::string SwiGLU::details() const {
  return "dim=" + std::to_string(options.dim) + ", hidden=" + std::to_string(options.hidden) +
         (options.bias ? ", bias" : "");
}

Tensor SwiGLU::forward(const Tensor& x) { return (*down)(swiglu((*gate)(x), (*up)(x))); }

}  // namespace brigade::nn
