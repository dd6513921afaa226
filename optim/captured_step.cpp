#include "optim/captured_step.h"

#include <utility>

#include "core/error.h"

namespace brigade::optim {

CapturedStep::CapturedStep(AdamW& optimizer, std::function<Tensor()> step)
    : optimizer_(optimizer), step_(std::move(step)) {
  BRIGADE_CHECK(step_ != nullptr, "CapturedStep: no step function");
}

Tensor CapturedStep::run() {
  if (!graph_.captured()) {
    const std::vector<Tensor> params = optimizer_.parameters();
    BRIGADE_CHECK(!params.empty(), "CapturedStep: the optimizer has no parameters to capture a step of");
    BRIGADE_CHECK(params[0].device().is_cuda(), "CapturedStep: the optimizer's parameters are on ",
                  params[0].device().str(), "; a CUDA graph needs them on a GPU");
    try {
      graph_.capture(params[0].device(), [&] {
        const Tensor loss = step_();
        BRIGADE_CHECK(loss.defined() && loss.numel() == 1,
                      "CapturedStep: the step must return its loss, a scalar; got ",
                      loss.defined() ? shape_str(loss.shape()) : std::string("an undefined tensor"));
        loss_ = loss.detach();
      });
    } catch (...) {
      // The capture recorded gradients that were never computed: leave none behind to be applied.
      for (Tensor p : params) p.zero_grad();
      throw;
    }
  }
  // Throws when the captured step never called the optimizer's step(): there is no update to replay.
  optimizer_.prepare_replay();
  graph_.replay();
  return loss_;
}

}  // namespace brigade::optim
