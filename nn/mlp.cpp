#include "nn/mlp.h"

namespace brigade::nn {

MLP::MLP(int64_t dim, int64_t hidden, bool bias, double dropout, const Init& init) {
  if (hidden == 0) hidden = 4 * dim;
  fc = register_module("fc", std::make_shared<Linear>(dim, hidden, bias, init.at("fc")));
  act = register_module("act", std::make_shared<GELU>());
  proj = register_module("proj", std::make_shared<Linear>(hidden, dim, bias, init.residual().at("proj")));
  drop = register_module("drop", std::make_shared<Dropout>(dropout));
}

// `act` is applied inside fc's GEMM epilogue rather than as a module call of its own: the same bits
// as (*act)((*fc)(x)), without a pass over the [.., hidden] activations (the widest in the block).
Tensor MLP::forward(const Tensor& x) { return (*drop)((*proj)(fc->forward(x, Activation::gelu))); }

}  // namespace brigade::nn
