// `brigade train` and the GPU's memory: --memory-limit applied to the run's device, and the text an
// out-of-memory error adds about the rank that hit it (core/memory_context.h): who it is, what it
// holds, and what to change.
#pragma once

#include <string>

#include "core/device.h"
#include "core/memory_context.h"
#include "pipeline/runtime.h"
#include "trainer.h"

namespace brigade::train {

// Sets --memory-limit (if given) for `device`, this process's GPU. Ranks that are threads of one
// process share the limit; under `brigade launch` every process sets it for its own GPU.
void apply_memory_limit(const TrainOptions& options, Device device);

// What `trainer`'s rank holds, counted from its tensors: its own parameters, their gradients and
// the optimizer's state exactly, the rest of the model it built, and the rest of what the device's
// allocator has handed out. `ranks_in_process`: how many ranks share this process's allocator.
std::string describe_rank_memory(Trainer& trainer, const pipeline::PipelineGroups* groups, int ranks_in_process);

// The out-of-memory advice, and the description above, registered for the calling thread.
MemoryContextScope register_memory_context(Trainer& trainer, const pipeline::PipelineGroups* groups);

}  // namespace brigade::train
