#include "pipeline/analysis/plan_memory.h"

#include <algorithm>

#include "core/error.h"

namespace brigade::pipeline {

std::vector<LayerMemory> layer_memory(const PlannedPipeline& p) {
  std::vector<LayerMemory> out;
  for (const LayerEstimate& layer : p.layers) {
    LayerMemory m;
    m.fixed = layer.parameters * kTrainingStateBytes;
    // With recomputation the stash is rebuilt inside every backward: once, not per micro-batch. Under
    // a split backward the rebuilt stash then lives on from I to W, once per micro-batch between them.
    if (p.recompute) m.fixed += layer.stash;
    if (!p.recompute || p.split_backward) m.activations = layer.stash + (p.split_backward ? layer.deferred : 0);
    out.push_back(m);
  }
  return out;
}

int64_t memory_overhead(const PlannedPipeline& p, const std::vector<int>& in_flight) {
  int64_t workspace = 0;
  for (const LayerEstimate& layer : p.layers) workspace = std::max(workspace, layer.workspace);
  const int most = in_flight.empty() ? 1 : *std::max_element(in_flight.begin(), in_flight.end());
  // Per stage and micro-batch in flight, at most: a received activation, a received gradient and,
  // with recomputation, the input it keeps — and one more of each being received.
  const int64_t messages = int64_t(p.layout.chunks) * (most + 1) * 3 * p.boundary;
  return p.batch_bytes + messages + workspace;
}

MemoryModel memory_model(const PlannedPipeline& p, const std::vector<int64_t>& bounds) {
  const int S = p.layout.stages();
  const int64_t n = int64_t(p.layers.size());
  BRIGADE_CHECK(int64_t(bounds.size()) == S + 1 && bounds.front() == 0 && bounds.back() == n,
                "memory_model: the split has ", bounds.size(), " bounds for ", S, " stages of ", n, " layers");
  MemoryModel model;
  model.stages.resize(size_t(S));
  std::vector<bool> holds_tied(size_t(p.layout.ranks), false);
  // A rank's stages in chunk order, so that the tied matrix is charged to the first stage holding it.
  for (int c = 0; c < p.layout.chunks; ++c) {
    for (int r = 0; r < p.layout.ranks; ++r) {
      const int s = p.layout.stage(r, c);
      StageMemory& m = model.stages[size_t(s)];
      int64_t parameters = 0, stash = 0, deferred = 0, workspace = 0;
      for (int64_t i = bounds[size_t(s)]; i < bounds[size_t(s) + 1]; ++i) {
        const LayerEstimate& layer = p.layers[size_t(i)];
        parameters += layer.parameters;
        stash += layer.stash;
        deferred += layer.deferred;
        workspace = std::max(workspace, layer.workspace);
        if (i == 0 || i == n - 1) {  // the embedding and the head: both hold the tied matrix
          if (holds_tied[size_t(r)]) parameters -= tied_parameters(p.shape);
          holds_tied[size_t(r)] = true;
        }
      }
      m.parameters = parameters * kParameterBytes;
      m.gradients = parameters * kGradientBytes;
      m.optimizer = parameters * kOptimizerStateBytes;
      m.activations = p.recompute ? (s == 0 ? p.input_bytes : p.boundary) : stash;
      if (p.split_backward) m.deferred = deferred + (p.recompute ? stash : 0);
      m.workspace = workspace + (p.recompute ? stash : 0);
      // Messages between stages on one rank are handed over, not received.
      if (s + 1 < S && p.layout.rank_of(s + 1) != r) m.gradient_in = p.boundary;
      if (s > 0 && p.layout.rank_of(s - 1) != r) m.activation_in = p.boundary;
    }
  }
  // Besides its own layers, a rank holds the step's batch (every rank builds it).
  model.resident.assign(size_t(p.layout.ranks), p.batch_bytes);
  return model;
}

}  // namespace brigade::pipeline
