// `brigade train`'s memory report for a pipeline: each rank's predicted peak over the last step
// (pipeline/analysis/memory.h) beside the peak its own MemoryAccount measured (core/memory_account.h):
// host memory on the CPU, the caching allocator's blocks on a GPU, where rank threads share a device.
//
// The prediction's sizes: parameters, gradients and AdamW state from the stages' parameter tensors
// (as the run device's allocator rounds them; Trainer::layer_bytes, measured on a sample of the layers), and
// nothing else of the model, since every rank builds only its own layers; the step's batch, which
// every rank builds; one micro-batch's stash and the workspace per stage
// from the last step's trace (pipeline/trace.h: stage_memory). Messages between ranks that are
// threads pass tensors without copies: a sent activation is counted in its sender's stash, and a
// sent gradient stays with its sender until the receiver copies it into its own buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <vector>

#include "core/cuda/caching_allocator.h"
#include "core/device.h"
#include "pipeline/analysis/memory.h"
#include "trainer.h"

namespace brigade::train {

// What `device`'s allocator hands out for `nbytes`: the CPU's rounds up to 64 (core/storage.cpp), at
// least 64; a GPU's caching allocator to 512 bytes, or 2 MiB from 1 MiB on.
inline int64_t allocated_bytes(Device device, size_t nbytes) {
  if (device.is_cuda()) return int64_t(cuda::CachingAllocator::round_size(nbytes));
  return int64_t(std::max<size_t>((nbytes + 63) / 64 * 64, 64));
}

// The memory model of the trainer's pipeline, with the stash and workspace measured by `trace`.
pipeline::MemoryModel memory_model(Trainer& trainer, const pipeline::Trace& trace);

// Prints one line per rank: predicted peak (and its parts), measured peak, their ratio. `simulated`
// (the schedule simulated with the measured costs) says when receivers take the gradients sent to
// them. Returns the ratios measured / predicted, per rank.
std::vector<double> report_memory(Trainer& trainer, const pipeline::Trace& trace,
                                  const pipeline::SimulationResult& simulated,
                                  const std::vector<double>& measured_peaks, std::ostream& out);

}  // namespace brigade::train
