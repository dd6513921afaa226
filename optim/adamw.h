// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW defines it,
// with PyTorch's defaults. The arithmetic is one multi-tensor kernel, ops::adamw_step_ (see
// kernels/cpu/adamw.cpp for the formula); this class keeps the state and batches the calls.
//
// State per parameter: exp_avg (m) and exp_avg_sq (v), f32 (f64 for f64 parameters), created as
// zeros at the parameter's first update, and the parameter's own step count t, which drives the bias
// correction — a parameter that skipped steps (no gradient) is corrected for the updates it received.
#pragma once

#include "kernels/params.h"
#include "optim/optimizer.h"

namespace brigade::optim {

// lr, beta1, beta2, eps, weight_decay: the kernel's own hyperparameter struct (see ops::AdamWParams
// for why it is one struct), so that nothing is copied field by field on the way to the kernel.
// `lr` is the starting learning rate (set_lr changes it later) and `step` must stay 1: the optimizer
// counts each parameter's steps itself.
using AdamWOptions = ops::AdamWParams;

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<NamedTensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});

  const AdamWOptions& options() const { return options_; }

 protected:
  void update(const std::vector<Slot*>& active) override;
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 private:
  AdamWOptions options_;
};

}  // namespace brigade::optim
