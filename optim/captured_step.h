// A whole training step — zero_grad, forward, loss, backward, clipping, the AdamW update — as one
// CUDA graph (core/cuda_graph.h): the step's few hundred launches cost the host two, the replay and
// the small copy that stages the optimizer's coefficients for it.
//
//   optimizer.set_capturable(true);
//   auto step = [&] {
//     optimizer.zero_grad();
//     Tape tape;
//     Tensor loss = tape.record([&] { return model.loss(idx, targets); });
//     tape.backward(loss);
//     optim::clip_grad_norm_on_device(optimizer.parameters(), 1.0);  // no wait for the norm
//     optimizer.step();
//     return loss.detach();
//   };
//   step();                                   // eager first: the optimizer's state, library handles
//   CapturedStep captured(optimizer, step);
//   for (...) {
//     optimizer.set_lr(schedule.lr(i));       // host values go in before each run
//     copy_(idx, next_inputs);                // inputs change in place
//     Tensor loss = captured.run();           // first call captures, every call replays
//   }
//
// What the graph rules (core/cuda_graph.h) ask of the step: fixed shapes, no reads on the host (use
// clip_grad_norm_on_device, read the loss after run()), no random numbers (dropout refuses), and
// inputs changed in place. The optimizer counts each run as a step, as an eager step() would.
#pragma once

#include <functional>

#include "core/cuda_graph.h"
#include "core/tensor.h"
#include "optim/adamw.h"

namespace brigade::optim {

class CapturedStep {
 public:
  // `step` runs one whole training step, optimizer.step() included, and returns its loss.
  CapturedStep(AdamW& optimizer, std::function<Tensor()> step);

  // The loss of this step (ready once the replay has run, like any kernel's result): the same
  // tensor every time.
  Tensor run();

  const CudaGraph& graph() const { return graph_; }

 private:
  AdamW& optimizer_;
  std::function<Tensor()> step_;
  CudaGraph graph_;
  Tensor loss_;
};

}  // namespace brigade::optim
