// `brigade train`'s memory report for a pipeline on the CPU: each rank's predicted peak over the last
// step (pipeline/analysis/memory.h) beside the peak its HostMemoryAccount measured.
//
// The prediction's sizes: parameters, gradients and AdamW state from the stages' parameter tensors
// (as the CPU allocator rounds them); each rank also keeps the rest of the model, because every rank
// builds the whole GPT before taking its stages; one micro-batch's stash and the workspace per stage
// from the last step's trace (pipeline/trace.h: stage_memory). Messages between ranks that are
// threads pass tensors without copies: a sent activation is counted in its sender's stash, and a
// sent gradient stays with its sender until the receiver copies it into its own buffer.
#pragma once

#include <ostream>
#include <vector>

#include "pipeline/analysis/memory.h"
#include "trainer.h"

namespace brigade::train {

// The memory model of the trainer's pipeline, with the stash and workspace measured by `trace`.
pipeline::MemoryModel memory_model(Trainer& trainer, const pipeline::Trace& trace);

// Prints one line per rank: predicted peak (and its parts), measured peak, their ratio. `simulated`
// (the schedule simulated with the measured costs) says when receivers take the gradients sent to
// them. Returns the ratios measured / predicted, per rank.
std::vector<double> report_memory(Trainer& trainer, const pipeline::Trace& trace,
                                  const pipeline::SimulationResult& simulated,
                                  const std::vector<double>& measured_peaks, std::ostream& out);

}  // namespace brigade::train
