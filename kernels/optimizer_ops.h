// ops for optimizers beyond the AdamW update of kernels/ops.h: global-norm clipping over a list of
// tensors (kernels/grad_norm.cpp), and AdamW with its coefficients staged in device memory, as a
// step captured in a CUDA graph needs (kernels/adamw.cpp). Each runs a whole list in a few launches
// on a GPU, and none waits for the device.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kernels/params.h"

namespace brigade::ops {

// The squares of every element of `tensors` (floating, on one device) summed in f64: each tensor's
// sum as sum(to_dtype(t, f64) * itself), then those added in list order from 0 — an f64 scalar on
// their device, with exactly those bits.
Tensor sum_of_squares(const std::vector<Tensor>& tensors);
// Multiplies every tensor in place by max_norm / (sqrt(sum_of_squares) + 1e-6) when that norm is
// finite and the factor below 1 (scale_'s arithmetic); otherwise leaves them as they are. On a GPU
// the rule is applied on the device: the host never waits for the norm.
void clip_by_norm_(const std::vector<Tensor>& tensors, const Tensor& sum_of_squares, double max_norm);

// adamw_step_ as a CUDA graph can capture it (GPU only): the kernels read the step's coefficients
// from `staged` — device memory from adamw_staging_buffer, filled by adamw_stage_ before each run,
// outside any capture (the values come from the host) — instead of from their arguments, so a
// replay uses the step count and learning rate staged just before it. The same bits as adamw_step_.
Tensor adamw_staging_buffer(Device device);
void adamw_stage_(const Tensor& staged, const AdamWParams& p);
void adamw_step_staged_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                        const std::vector<Tensor>& m, const std::vector<Tensor>& v, const Tensor& staged);

}  // namespace brigade::ops
