#include "device_memory.h"

#include <set>
#include <sstream>

#include "comm/comm.h"
#include "core/format.h"
#include "core/stream.h"
#include "pipeline/partition.h"

namespace brigade::train {

namespace {

// Each distinct storage once (a tied weight is one tensor in two layers).
struct Held {
  int64_t elements = 0;
  size_t bytes = 0;
};
Held held(const std::vector<Tensor>& tensors, std::set<const void*>& seen) {
  Held h;
  for (const Tensor& t : tensors)
    if (t.defined() && seen.insert(t.storage().data()).second) {
      h.elements += t.numel();
      h.bytes += t.storage().nbytes();
    }
  return h;
}

std::string bytes(size_t n) { return format_bytes(double(n)); }

}  // namespace

void apply_memory_limit(const TrainOptions& options, Device device) {
  if (options.memory_limit.none()) return;
  // check_combination refused --memory-limit for the CPU; a CUDA device is what is left.
  set_cuda_memory_limit(device, options.memory_limit, "--memory-limit " + options.memory_limit.str());
}

std::string describe_rank_memory(Trainer& trainer, const pipeline::PipelineGroups* groups, int ranks_in_process) {
  std::ostringstream os;
  const Device device = trainer.model().config().device;
  if (groups != nullptr) {
    const pipeline::Schedule& schedule = trainer.schedule();
    const int rank = groups->pipeline->rank();
    os << "rank " << rank << " (stage";
    if (schedule.chunks() > 1) os << "s";
    for (int c = 0; c < schedule.chunks(); ++c) os << (c > 0 ? ", " : " ") << schedule.layout.stage(rank, c);
    os << " of " << schedule.stages() << ")";
  } else {
    os << "this process (the whole model on " << device.str() << ")";
  }
  // The optimizer holds exactly this rank's parameters.
  std::set<const void*> seen;
  const optim::AdamW* adamw = trainer.optimizer_if_any();
  const std::vector<Tensor> own = adamw ? adamw->parameters() : std::vector<Tensor>{};
  const Held params = held(own, seen);
  std::vector<Tensor> grads;
  for (const Tensor& p : own) grads.push_back(p.grad());
  const Held gradients = held(grads, seen);
  const size_t optimizer = adamw ? adamw->state_bytes() : 0;
  // Parameters the model holds that this rank does not train: none, as a rank builds only its own
  // layers (pipeline::gpt_rank_model); counted should that ever change.
  const Held others = held(trainer.model().parameters(), seen);
  os << ": parameters " << bytes(params.bytes) << " (" << with_commas(params.elements) << "), gradients "
     << bytes(gradients.bytes) << ", optimizer state " << bytes(optimizer);
  if (others.bytes > 0) os << ", parameters held but not trained here " << bytes(others.bytes);
  if (device.is_cuda()) {
    const size_t in_use = cuda_memory_stats(device).allocated;
    const size_t counted = params.bytes + gradients.bytes + optimizer + others.bytes;
    if (ranks_in_process == 1)
      os << ", the rest (stashed activations, workspace) " << bytes(in_use > counted ? in_use - counted : 0);
    else
      os << "; " << bytes(in_use) << " in use on " << device.str() << " by all " << ranks_in_process
         << " ranks of this process (they share its memory limit)";
  }
  os << ".\nTo fit, try: more pipeline stages (--stages), --recompute, fewer micro-batches in flight (--schedule 1f1b "
        "rather than gpipe), a smaller --batch, or a higher --memory-limit.";
  return os.str();
}

MemoryContextScope register_memory_context(Trainer& trainer, const pipeline::PipelineGroups* groups) {
  // Launched ranks are processes of their own; otherwise every rank is a thread of this one.
  const TrainOptions& o = trainer.options();
  const int ranks_in_process =
      groups == nullptr || comm::read_launch_env().world_size > 1 ? 1 : int(o.stages * o.replicas);
  return MemoryContextScope(
      [&trainer, groups, ranks_in_process] { return describe_rank_memory(trainer, groups, ranks_in_process); });
}

}  // namespace brigade::train
