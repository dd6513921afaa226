// The plain types that the kernels share with the API above them: the differentiable functions
// (autograd/functions.h) and the optimizers (optim/) take these, so they include this header and
// not kernels/ops.h. That keeps the raw, non-differentiable kernels (brigade::ops) out of
// <brigade.h>: a user who wants them for a backward of their own includes "kernels/ops.h" by name.
#pragma once

#include <cstdint>

namespace brigade {

// How a loss over many positions becomes one number. (In namespace brigade rather than ops so that a
// call like cross_entropy(x, t, -100, Reduction::sum) doesn't also find ops::cross_entropy by ADL.)
enum class Reduction { mean, sum };

}  // namespace brigade

namespace brigade::ops {

// AdamW's hyperparameters, declared once: optim::AdamWOptions is this same struct, so what a user
// sets on the optimizer is exactly what the kernel (ops::adamw_step_) receives. They live at the
// kernel level because optim/ builds on kernels/, never the reverse. The defaults are PyTorch's.
// `step` drives the bias correction; the optimizer fills it in per parameter (each counts its own
// updates), so in AdamWOptions it stays at 1.
struct AdamWParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  int64_t step = 1;
};

}  // namespace brigade::ops
