// Forward, loss and backward of a model as one CUDA graph (core/cuda_graph.h): a training step whose
// hundreds of kernel launches cost the host one.
//
//   GraphedBackward graphed(model.parameters(), [&] { return model.loss(idx, targets); });
//   for (...) {
//     copy_(idx, next_inputs); copy_(targets, next_targets);  // in place: the graph reads these
//     Tensor loss = graphed.run();  // first call captures, every call replays
//     optimizer.step();             // eager, after the replay (a graph would freeze its lr and step)
//   }
//
// run() drops the parameters' gradients and records loss_fn and the backward once; from then on each
// run() replays them, writing the new gradients into the very tensors the capture left in each
// param.grad() and the new loss into the tensor it returns. So between runs nothing may replace
// those tensors — no zero_grad() (every replay overwrites the gradients anyway, it never adds to
// them); run() checks and says so. The caller runs the work eagerly at least once before the first
// run() (warm-up: optimizer state, library handles), keeps the inputs loss_fn reads alive and
// changes them only in place. Random numbers (dropout) refuse to be captured.
#pragma once

#include <functional>
#include <vector>

#include "core/cuda_graph.h"
#include "core/tensor.h"

namespace brigade {

class GraphedBackward {
 public:
  GraphedBackward(std::vector<Tensor> params, std::function<Tensor()> loss_fn);

  // The loss of this step (a scalar on the parameters' GPU; its value is ready once the replay has
  // run, like any kernel's result). The same tensor every time.
  Tensor run();

  const CudaGraph& graph() const { return graph_; }

 private:
  void capture();       // capture_once, leaving no gradients behind if it fails
  void capture_once();

  std::vector<Tensor> params_;
  std::function<Tensor()> loss_fn_;
  CudaGraph graph_;
  Tensor loss_;
  std::vector<Tensor> grads_;  // what the capture left in each param.grad()
};

}  // namespace brigade
