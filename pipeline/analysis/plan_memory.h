// What each rank holds in a pipeline the planner considers (pipeline/analysis/planner.h), in bytes,
// from the analytic layer estimates (gpt_costs.h). Two views of the same sizes:
//
//   layer_memory + memory_overhead   for partition_within_memory: per layer what it adds to its stage
//                                    (held all step, and per micro-batch in flight), and what every
//                                    rank holds whatever the split. The split is chosen so that a
//                                    rank's stages fit the device's memory less that overhead.
//   memory_model                     for predict_memory, which walks the schedule and gives each
//                                    rank's peak: the judge of whether a configuration fits.
//
// The sizes are those of `brigade train` on GPUs under `brigade launch` (one process per rank):
//   - a rank builds only its own layers (pipeline/gpt_stages.h), and holds for each of their
//     parameters the f32 master weight (also under bf16 compute), its f32 gradient and AdamW's two f32
//     moments: 16 bytes. The head's stage holds a copy of the tied embedding matrix when another
//     rank holds the embedding; a rank holding both holds it once;
//   - a stage stashes its layers' stash per micro-batch in flight; with recomputation only its input,
//     and the whole stash reappears for a moment in each backward (its workspace); a split backward's
//     I keeps `deferred` until W (with recomputation, the replayed stash too);
//   - between processes a received activation and a received gradient each have a buffer of their
//     own until the backward that uses them; a sent one is the receiver's business.
// The overhead is an upper bound on the part of predict_memory's peak that layer_memory leaves out
// (message buffers: at most one more than the micro-batches in flight per stage and kind; one
// backward's workspace: the largest layer's), so a split that fits its budget never has a predicted
// peak above the device's memory. Left out: the CUDA context, NCCL's buffers, the caching allocator's
// rounding and cached blocks (docs/pipeline.md, "The planner").
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/action.h"
#include "pipeline/analysis/gpt_costs.h"
#include "pipeline/analysis/memory.h"
#include "pipeline/partition.h"

namespace brigade::pipeline {

// Bytes per parameter a rank trains: the f32 parameter, its f32 gradient and AdamW's two f32 moments.
constexpr int64_t kParameterBytes = 4;
constexpr int64_t kGradientBytes = 4;
constexpr int64_t kOptimizerStateBytes = 2 * 4;
constexpr int64_t kTrainingStateBytes = kParameterBytes + kGradientBytes + kOptimizerStateBytes;

struct PlannedPipeline {
  GptShape shape;
  std::vector<LayerEstimate> layers;  // estimate_gpt_layers for one micro-batch
  Layout layout;
  bool recompute = false;
  bool split_backward = false;   // the schedule runs I and W apart (zb-h1, zb-v, dualpipev)
  int64_t boundary = 0;          // bytes of one activation message (gpt_boundary_bytes)
  int64_t input_bytes = 0;       // one micro-batch's token ids: stage 0's input
  int64_t batch_bytes = 0;       // the replica's token ids and targets for the step, on every rank
};

// Per layer: bytes held all step (its parameters' training state, the tied matrix in both the
// embedding and the head; with recomputation also its stash, which each backward rebuilds) and per micro-batch in flight (its stash, plus what I keeps for W when split).
std::vector<LayerMemory> layer_memory(const PlannedPipeline& pipeline);

// What a rank holds besides its layers' memory: the batch, message buffers and one backward's
// workspace, for `in_flight` (per stage: micro-batches stashed at once).
int64_t memory_overhead(const PlannedPipeline& pipeline, const std::vector<int>& in_flight);

// The model predict_memory needs, for the split `bounds` (P*V + 1 entries, as Partition::bounds).
MemoryModel memory_model(const PlannedPipeline& pipeline, const std::vector<int64_t>& bounds);

}  // namespace brigade::pipeline
