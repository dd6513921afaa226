// SwiGLU: the feed-forward network of LLaMA-style blocks, down(silu(gate(x)) * up(x)).
//
// Two projections into the hidden width instead of GPT-2's one: `gate` passes through SiLU and
// scales `up` elementwise, a learned gate on every hidden unit. The gate and product run as one
// kernel each way (brigade::swiglu), so silu(gate) is never stored. No biases by default (LLaMA has
// none).
#pragma once

#include <memory>

#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace brigade::nn {

struct SwiGLUOptions {
  int64_t dim = 0;     // the model's width (input and output)
  int64_t hidden = 0;  // the hidden width (LLaMA 2 7B: 11008 for dim 4096)
  bool bias = false;
  Init init = {};
};

class SwiGLU : public Module {
 public:
  // `down` writes into the residual stream: it is initialised with init.residual().
  explicit SwiGLU(const SwiGLUOptions& options);

  std::string name() const override { return "SwiGLU"; }
  std::string details() const override;
  Tensor forward(const Tensor& x) override;  // [..., dim] -> [..., dim]

  const SwiGLUOptions options;
  std::shared_ptr<Linear> gate;  // dim -> hidden, through SiLU
  std::shared_ptr<Linear> up;    // dim -> hidden
  std::shared_ptr<Linear> down;  // hidden -> dim
};

}  // namespace brigade::nn
