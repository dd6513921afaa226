#include "nn/mlp.h"

namespace brigade::nn {

MLP::MLP(int64_t dim, const MLPOptions& o) {
  const int64_t hidden = o.hidden == 0 ? 4 * dim : o.hidden;
  fc = register_module("fc", std::make_shared<Linear>(dim, hidden, LinearOptions{.bias = o.bias, .init = o.init.at("fc")}));
  act = register_module("act", std::make_shared<GELU>());
  proj = register_module(
      "proj", std::make_shared<Linear>(hidden, dim, LinearOptions{.bias = o.bias, .init = o.init.residual().at("proj")}));
  drop = register_module("drop", std::make_shared<Dropout>(o.dropout));
}

// `act` is applied inside fc's GEMM epilogue rather than as a module call of its own: the same bits
// as (*act)((*fc)(x)), without a pass over the [.., hidden] activations (the widest in the block).
Tensor MLP::forward(const Tensor& x) { return (*drop)((*proj)(fc->forward(x, Activation::gelu))); }

}  // namespace brigade::nn
