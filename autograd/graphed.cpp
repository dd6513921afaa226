#include "autograd/graphed.h"

#include <utility>

#include "autograd/tape.h"
#include "core/error.h"

namespace brigade {

GraphedBackward::GraphedBackward(std::vector<Tensor> params, std::function<Tensor()> loss_fn)
    : params_(std::move(params)), loss_fn_(std::move(loss_fn)) {
  BRIGADE_CHECK(!params_.empty(), "GraphedBackward: no parameters");
  BRIGADE_CHECK(loss_fn_ != nullptr, "GraphedBackward: no loss function");
  for (size_t i = 0; i < params_.size(); ++i) {
    BRIGADE_CHECK(params_[i].defined(), "GraphedBackward: parameter ", i, " is undefined");
    BRIGADE_CHECK(params_[i].device() == params_[0].device() && params_[0].device().is_cuda(),
                  "GraphedBackward: every parameter must be on one GPU; parameter 0 is on ", params_[0].device().str(),
                  " and parameter ", i, " on ", params_[i].device().str());
  }
}

void GraphedBackward::capture() {
  try {
    capture_once();
  } catch (...) {
    // The capture recorded gradients that were never computed: leave none behind to be applied.
    for (Tensor& p : params_) p.zero_grad();
    throw;
  }
  grads_.clear();
  for (const Tensor& p : params_) grads_.push_back(p.grad());
}

void GraphedBackward::capture_once() {
  graph_.capture(params_[0].device(), [&] {
    // Gradients start from nothing inside the graph, so every replay writes them afresh; blocks of
    // the old ones are freed here, in the capture, and join the graph's pool.
    for (Tensor& p : params_) p.zero_grad();
    Tape tape;
    Tensor loss = tape.record(loss_fn_);
    BRIGADE_CHECK(loss.defined() && loss.numel() == 1, "GraphedBackward: the loss function must return a scalar, got ",
                  loss.defined() ? shape_str(loss.shape()) : std::string("an undefined tensor"));
    tape.backward(loss);
    loss_ = loss.detach();
  });
}

Tensor GraphedBackward::run() {
  if (!graph_.captured()) {
    capture();
  } else {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor g = params_[i].grad();
      const bool same = g.defined() ? g.same_as(grads_[i]) : !grads_[i].defined();
      BRIGADE_CHECK(same, "GraphedBackward::run: the gradient of parameter ", i,
                    " is no longer the tensor the graph writes (zero_grad() or set_grad() since the last run?); "
                    "leave gradients alone between runs — each replay overwrites them");
    }
  }
  graph_.replay();
  return loss_;
}

}  // namespace brigade
