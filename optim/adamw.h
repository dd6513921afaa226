// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW defines it,
// with PyTorch's defaults. The arithmetic is one multi-tensor kernel, ops::adamw_step_ (see
// kernels/cpu/adamw.cpp for the formula); this class keeps the state and batches the calls.
//
// State per parameter: exp_avg (m) and exp_avg_sq (v), f32 (f64 for f64 parameters), created as
// zeros at the parameter's first update, and the parameter's own step count t, which drives the bias
// correction — a parameter that skipped steps (no gradient) is corrected for the updates it received.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

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

  // CUDA graphs (optim/captured_step.h). Capturable, each update stages its coefficients — what the
  // step count and learning rate make of the hyperparameters — in device memory (one small copy)
  // and the kernels read them there (ops::adamw_step_staged_), so step() may run while a graph
  // captures, and each replay uses the values staged just before it. The same bits as otherwise.
  // Every parameter must be on a GPU and updated at every step (one step count for all); the first
  // step must run eagerly, before a capture (it creates the state the graph then updates in place).
  void set_capturable(bool on);
  // Before each replay of a captured step: counts the step, as step() would have (not after the
  // capture itself, whose step() counted the first replay's), and stages its coefficients.
  void prepare_replay();

 protected:
  void update(const std::vector<Slot*>& active) override;
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  bool capturable() const override { return capturable_; }

 private:
  ops::AdamWParams hyperparameters(int64_t step, double weight_decay) const;
  void update_staged(const std::vector<Slot*>& active);
  void stage(const std::vector<Slot*>& slots);

  AdamWOptions options_;
  bool capturable_ = false;
  std::map<std::pair<double, std::string>, Tensor> staged_;  // per (weight decay, device): the coefficients
  std::vector<Slot*> captured_;  // the slots a captured step updates
  bool capture_counted_ = false;  // the capture's step() counted the first replay's step
};

}  // namespace brigade::optim
