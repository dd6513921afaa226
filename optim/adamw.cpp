#include "optim/adamw.h"

#include <tuple>

#include "core/cuda_graph.h"
#include "core/factory.h"
#include "kernels/ops.h"
#include "kernels/optimizer_ops.h"

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

ops::AdamWParams AdamW::hyperparameters(int64_t step, double weight_decay) const {
  ops::AdamWParams hyper = options_;
  hyper.lr = lr();  // options_.lr was only the start: set_lr() (a schedule) moves it
  hyper.weight_decay = weight_decay;
  hyper.step = step;
  return hyper;
}

void AdamW::update(const std::vector<Slot*>& active) {
  for (Slot* slot : active) {
    if (!slot->buffers.empty()) continue;
    const Tensor& p = slot->param;
    // Zeros written in a capture would be written again at every replay: the state must exist first.
    BRIGADE_CHECK(!is_capturing(p.device()), "AdamW.step: parameter '", slot->name,
                  "' has no state yet, and a CUDA graph is capturing; run one step eagerly before the capture");
    slot->buffers["exp_avg"] = zeros(p.shape(), state_dtype(p), p.device());
    slot->buffers["exp_avg_sq"] = zeros(p.shape(), state_dtype(p), p.device());
  }
  if (capturable_) {
    update_staged(active);
    return;
  }
  // One kernel call per distinct (step, weight decay, device): normally a single call for the whole
  // model, since every parameter usually has the same step count.
  struct Batch {
    std::vector<Tensor> params, grads, exp_avg, exp_avg_sq;
  };
  std::map<std::tuple<int64_t, double, std::string>, Batch> batches;
  for (Slot* slot : active) {
    const Tensor& p = slot->param;
    const double weight_decay = slot->weight_decay.value_or(options_.weight_decay);
    Batch& b = batches[{slot->step, weight_decay, p.device().str()}];
    b.params.push_back(p);
    b.grads.push_back(p.grad());
    b.exp_avg.push_back(slot->buffers.at("exp_avg"));
    b.exp_avg_sq.push_back(slot->buffers.at("exp_avg_sq"));
  }
  for (const auto& [key, b] : batches)
    ops::adamw_step_(b.params, b.grads, b.exp_avg, b.exp_avg_sq, hyperparameters(std::get<0>(key), std::get<1>(key)));
}

void AdamW::set_capturable(bool on) {
  if (on)
    for (const Slot& slot : slots_)
      BRIGADE_CHECK(slot.param.device().is_cuda(), "AdamW.set_capturable: parameter '", slot.name, "' is on ",
                    slot.param.device().str(), "; a step captured as a CUDA graph needs every parameter on a GPU");
  capturable_ = on;
  captured_.clear();
  capture_counted_ = false;
}

void AdamW::stage(const std::vector<Slot*>& slots) {
  std::map<std::pair<double, std::string>, bool> done;
  for (Slot* slot : slots) {
    const double weight_decay = slot->weight_decay.value_or(options_.weight_decay);
    const std::pair<double, std::string> key{weight_decay, slot->param.device().str()};
    if (done[key]) continue;
    done[key] = true;
    Tensor& staged = staged_[key];
    if (!staged.defined()) staged = ops::adamw_staging_buffer(slot->param.device());
    ops::adamw_stage_(staged, hyperparameters(slot->step, weight_decay));
  }
}

void AdamW::update_staged(const std::vector<Slot*>& active) {
  for (Slot* slot : active)
    BRIGADE_CHECK(slot->step == active[0]->step, "AdamW (capturable): parameter '", slot->name, "' is at step ",
                  slot->step, " but '", active[0]->name, "' at step ", active[0]->step,
                  "; a capturable step updates every parameter at every step");
  const bool capturing = is_capturing(active[0]->param.device());
  if (capturing) {
    // The replays stage their own coefficients (prepare_replay); the buffers must exist already.
    for (Slot* slot : active)
      BRIGADE_CHECK(staged_.count({slot->weight_decay.value_or(options_.weight_decay), slot->param.device().str()}),
                    "AdamW (capturable): parameter '", slot->name,
                    "' has no staged coefficients yet; run one capturable step eagerly before the capture");
    captured_ = active;
    capture_counted_ = true;
  } else {
    stage(active);
  }
  std::map<std::pair<double, std::string>, std::vector<Slot*>> batches;
  for (Slot* slot : active)
    batches[{slot->weight_decay.value_or(options_.weight_decay), slot->param.device().str()}].push_back(slot);
  for (const auto& [key, slots] : batches) {
    std::vector<Tensor> params, grads, exp_avg, exp_avg_sq;
    for (Slot* slot : slots) {
      params.push_back(slot->param);
      grads.push_back(slot->param.grad());
      exp_avg.push_back(slot->buffers.at("exp_avg"));
      exp_avg_sq.push_back(slot->buffers.at("exp_avg_sq"));
    }
    ops::adamw_step_staged_(params, grads, exp_avg, exp_avg_sq, staged_.at(key));
  }
}

void AdamW::prepare_replay() {
  BRIGADE_CHECK(capturable_ && !captured_.empty(),
                "AdamW.prepare_replay: no step of this optimizer was captured (set_capturable(true), then capture a "
                "step that calls step())");
  if (!capture_counted_) count_step(captured_);
  capture_counted_ = false;
  stage(captured_);
}

}  // namespace brigade::optim
