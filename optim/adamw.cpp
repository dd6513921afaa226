#include "optim/adamw.h"

#include <tuple>

#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::optim {

AdamW::AdamW(std::vector<NamedTensor> params, AdamWOptions options)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer("AdamW", std::move(groups), options.lr), options_(options) {
  BRIGADE_CHECK(options.step == 1, "AdamW: options.step is ", options.step,
                "; leave it at 1 (the optimizer counts each parameter's steps itself, and its state_dict keeps them)");
  check_non_negative("eps", options.eps);
  check_non_negative("weight_decay", options.weight_decay);
  BRIGADE_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
                "AdamW: betas must be in [0, 1), got (", options.beta1, ", ", options.beta2, ")");
}

void AdamW::update(const std::vector<Slot*>& active) {
  // One kernel call per distinct (step, weight decay, device): normally a single call for the whole
  // model, since every parameter usually has the same step count.
  struct Batch {
    std::vector<Tensor> params, grads, exp_avg, exp_avg_sq;
  };
  std::map<std::tuple<int64_t, double, std::string>, Batch> batches;
  for (Slot* slot : active) {
    const Tensor& p = slot->param;
    if (slot->buffers.empty()) {
      slot->buffers["exp_avg"] = zeros(p.shape(), state_dtype(p), p.device());
      slot->buffers["exp_avg_sq"] = zeros(p.shape(), state_dtype(p), p.device());
    }
    const double weight_decay = slot->weight_decay.value_or(options_.weight_decay);
    Batch& b = batches[{slot->step, weight_decay, p.device().str()}];
    b.params.push_back(p);
    b.grads.push_back(p.grad());
    b.exp_avg.push_back(slot->buffers.at("exp_avg"));
    b.exp_avg_sq.push_back(slot->buffers.at("exp_avg_sq"));
  }
  for (const auto& [key, b] : batches) {
    ops::AdamWParams hyper = options_;
    hyper.lr = lr();  // options_.lr was only the start: set_lr() (a schedule) moves it
    hyper.weight_decay = std::get<1>(key);
    hyper.step = std::get<0>(key);
    ops::adamw_step_(b.params, b.grads, b.exp_avg, b.exp_avg_sq, hyper);
  }
}

}  // namespace brigade::optim
