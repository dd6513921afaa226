// Pipeline's forward-only pass (evaluation): runtime.h, "evaluation". The schedule is
// forward_only_schedule() on the training layout, run by an executor of its own that shares the
// training executor's chunks (the same layers, so the same live weights).
#include <string>

#include "core/error.h"
#include "core/factory.h"
#include "kernels/ops.h"
#include "pipeline/exchange.h"
#include "pipeline/host_values.h"
#include "pipeline/runtime.h"

namespace brigade::pipeline {

namespace {

// An output's header as it travels: dtype, rank (number of dims), then up to kMaxDims sizes.
constexpr int kMaxDims = 8;
constexpr size_t kHeader = 2 + kMaxDims;
// Where the forward-only executors' message tags start: far above the training executor's
// ((boundary * 2 + 1) * (1 + skips) + slot), below brigade train's checkpoint messages (1 << 24).
constexpr int kForwardTags = 1 << 22;

}  // namespace

Executor& Pipeline::forward_executor(int microbatches) {
  auto found = forward_executors_.find(microbatches);
  if (found != forward_executors_.end()) return *found->second;
  comm::Communicator& comm = *groups_.pipeline;
  Schedule schedule = forward_only_schedule(executor_->schedule().layout, microbatches);
  // The same checks the training schedule passed in the constructor (the sizes of evaluation
  // batches and of decoded sequences vary, so messages always carry their shapes).
  check_exchanges_for(comm, schedule, /*varying_shapes=*/true);
  ExecutorOptions exec;
  exec.variable_shapes = true;
  exec.tag_base = kForwardTags;  // the training executor's channels are fixed-shape
  exec.skips = options_.skips;
  // Connecting the links is a collective: every rank of the pipeline builds this executor at the
  // same call.
  auto made = std::make_unique<Executor>(comm, std::move(schedule), executor_->chunks(), loss_, exec);
  return *forward_executors_.emplace(microbatches, std::move(made)).first->second;
}

std::vector<Tensor> Pipeline::run_forward(int microbatches, const std::vector<Tensor>& inputs,
                                          const std::vector<Tensor>& targets,
                                          const std::function<Tensor(const Tensor&)>& keep) {
  const Layout& layout = executor_->schedule().layout;
  BRIGADE_CHECK(microbatches >= 1, "pipeline forward: needs at least one micro-batch, got M=", microbatches,
                " (rank ", rank(), ")");
  if (layout.rank_of(0) == rank())
    BRIGADE_CHECK(int(inputs.size()) == microbatches, "pipeline forward: M=", microbatches, " micro-batches but rank ",
                  rank(), " (stage 0) was given ", inputs.size(), " inputs");
  Executor& executor = forward_executor(microbatches);
  // Not traced, even while training steps are: last_trace() stays the last training step's, which
  // the timeline, the bubble and the memory report compare with the training schedule (an
  // evaluation after the last step used to replace it, and the comparison then failed the run
  // before its final save).
  return executor.run_forward(inputs, targets, keep, nullptr);
}

std::vector<double> Pipeline::forward_losses(int microbatches, const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& targets) {
  comm::Communicator& comm = *groups_.pipeline;
  const Layout& layout = executor_->schedule().layout;
  const int last = layout.rank_of(layout.stages() - 1);
  try {
    if (last == rank())
      BRIGADE_CHECK(int(targets.size()) == microbatches, "pipeline forward: M=", microbatches,
                    " micro-batches but rank ", rank(), " (the last stage) was given ", targets.size(), " targets");
    // The last stage's rank computes the losses; the others pass no targets (they hold no loss).
    const std::vector<Tensor> none;
    std::vector<Tensor> losses = run_forward(microbatches, inputs, last == rank() ? targets : none, nullptr);
    // The losses as forward_backward reports them: read once, as doubles.
    Tensor all = last == rank() ? doubles_on(comm, ops::concat(losses, 0).to_vector())
                                : zeros({microbatches}, DType::f64, comm.device());
    comm.broadcast(all, last);
    return doubles_of(all);
  } catch (const std::exception& e) {
    comm.abort("pipeline rank " + std::to_string(rank()) + " failed in a forward-only pass: " + e.what());
    throw;
  }
}

std::vector<Tensor> Pipeline::forward_outputs(int microbatches, const std::vector<Tensor>& inputs,
                                              const std::function<Tensor(const Tensor&)>& keep) {
  comm::Communicator& comm = *groups_.pipeline;
  const Layout& layout = executor_->schedule().layout;
  const int last = layout.rank_of(layout.stages() - 1);
  try {
    std::vector<Tensor> outputs = run_forward(microbatches, inputs, {}, keep);
    // First every output's dtype and shape, then the outputs themselves, each from the last stage.
    std::vector<double> header(size_t(microbatches) * kHeader, 0.0);
    if (last == rank()) {
      for (int m = 0; m < microbatches; ++m) {
        const Tensor& t = outputs[size_t(m)];
        BRIGADE_CHECK(t.dim() <= kMaxDims, "pipeline forward: the last stage's output for micro-batch ", m, " is ",
                      shape_str(t.shape()), "; at most ", kMaxDims, " dims travel");
        double* h = header.data() + size_t(m) * kHeader;
        h[0] = double(int(t.dtype()));
        h[1] = double(t.dim());
        for (int d = 0; d < t.dim(); ++d) h[2 + d] = double(t.size(d));
      }
    }
    Tensor travelling = doubles_on(comm, header);
    comm.broadcast(travelling, last);
    header = doubles_of(travelling);
    std::vector<Tensor> out;
    for (int m = 0; m < microbatches; ++m) {
      const double* h = header.data() + size_t(m) * kHeader;
      Tensor t;
      if (last == rank()) {
        t = outputs[size_t(m)].to(comm.device()).contiguous();
      } else {
        std::vector<int64_t> shape;
        for (int d = 0; d < int(h[1]); ++d) shape.push_back(int64_t(h[2 + d]));
        t = empty(shape, DType(int(h[0])), comm.device());
      }
      comm.broadcast(t, last);
      out.push_back(t);
    }
    return out;
  } catch (const std::exception& e) {
    comm.abort("pipeline rank " + std::to_string(rank()) + " failed in a forward-only pass: " + e.what());
    throw;
  }
}

}  // namespace brigade::pipeline
