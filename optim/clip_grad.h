// clip_grad_norm: rescale gradients so their global L2 norm is at most max_norm (torch's
// clip_grad_norm_). Large, rare gradient spikes otherwise throw a model far off in one step.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace brigade::optim {

// Returns the total L2 norm of every gradient together (as if concatenated into one vector),
// accumulated in f64; tensors without a gradient are skipped. When the norm exceeds max_norm, every
// gradient is multiplied in place by max_norm / (norm + 1e-6). A non-finite norm (an inf or NaN
// gradient) is returned with the gradients untouched, so the caller can notice and skip the step.
// On a GPU: a few multi-tensor launches for the whole list (ops::sum_of_squares, ops::clip_by_norm_)
// and one wait, for the norm this returns.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The same without the wait: the norm stays on the gradients' device as an f64 scalar, and the
// device decides whether to scale — what a step captured as a CUDA graph needs. At least one
// parameter must have a gradient.
Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm);

}  // namespace brigade::optim
