// Partitioning: which layers go to which pipeline stage.
//
// A model for the pipeline is an ordered list of one-tensor-in, one-tensor-out layers — for a GPT,
// nn::GPT::layers() = [embedding, block 0, ..., block n-1, head]. A partition cuts that list into
// S contiguous stages (stage s runs layers [begin(s), end(s)) and hands its output to stage s + 1),
// and the schedule's Layout says which rank holds stage s (pipeline/action.h): rank s % P when
// interleaved (rank r holds the non-adjacent stages r, r + P, r + 2P, ...), or in a V, stages r
// and 2P-1-r.
//
// A pipeline runs at the pace of its slowest stage, so the split minimises the largest stage cost.
// The cost of a layer can be
//   - 1 (split by layer count: the default when layers are alike),
//   - its parameter count (a proxy for both memory and matmul time), or
//   - its measured time (forward + backward once on a sample input: profile_layers()).
// balance() does the rest, exactly, by dynamic programming. Among the splits that reach the best
// maximum it picks the one with the smallest sum of squared stage costs (the most even), and among
// those the one that gives earlier stages less: under 1F1B, stage s stashes P - s micro-batches of
// activations, so the first stages are the ones short of memory.
//
// Every layer lands in exactly one stage, in order. With S <= n layers, no stage is empty; with
// S > n, the first S - n stages are empty (they pass their input through) and the others hold one
// layer each.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "pipeline/action.h"

namespace brigade::pipeline {

using Layers = std::vector<std::shared_ptr<nn::Module>>;

struct Partition {
  std::vector<int64_t> bounds;      // S + 1 entries: 0 = bounds[0] <= bounds[1] <= ... <= bounds[S] = n
  std::vector<double> layer_costs;  // what the split balanced (one per layer)
  std::string cost_name;            // "layers", "parameters", "seconds", or what the caller called it

  int64_t stages() const { return int64_t(bounds.size()) - 1; }
  int64_t layers() const { return bounds.empty() ? 0 : bounds.back(); }
  int64_t begin(int64_t stage) const { return bounds.at(size_t(stage)); }
  int64_t end(int64_t stage) const { return bounds.at(size_t(stage) + 1); }
  int64_t size(int64_t stage) const { return end(stage) - begin(stage); }
  double cost(int64_t stage) const;  // sum of its layers' costs
  double max_cost() const;           // the bottleneck the split minimised
  int64_t stage_of_layer(int64_t layer) const;
};

// The balanced split of `costs` (finite, non-negative) into `stages` contiguous parts; returns the
// S + 1 bounds. Exact; O(S n^2) time.
std::vector<int64_t> balance(const std::vector<double>& costs, int64_t stages);

// ---- Balancing time under a memory budget ----
// A stage holds its layers' parameters, gradients and optimizer state all step (`fixed`), and one
// stash of activations per micro-batch in flight: under 1F1B stage s has P - s of them at once, so
// the first stages are the ones that run out of memory, and a layer whose stash is large (a head
// with its vocabulary-wide logits) weighs on the stage that holds it more than its time says.
struct LayerMemory {
  int64_t fixed = 0;        // bytes held all step: parameters, gradients, optimizer state
  int64_t activations = 0;  // bytes one micro-batch's forward keeps for its backward
};

struct MemoryLimit {
  std::vector<int> in_flight;     // per stage: micro-batches stashed at once (the simulator's peak_activations)
  std::vector<int64_t> capacity;  // per stage: the bytes it may hold
  // What stage `stage` holds with layers [begin, end): their fixed bytes + in_flight x their stash.
  int64_t bytes(int64_t stage, const std::vector<LayerMemory>& layers, int64_t begin, int64_t end) const;
};

// A per-rank budget as per-stage capacities: a rank holding V chunks gives each a V-th of it (a rank's
// stages are not adjacent, so one split could not trade memory between them without coupling the
// whole search; the even share is the simple, safe side). `in_flight`: one count per stage.
MemoryLimit memory_limit(const Layout& layout, const std::vector<int>& in_flight, int64_t bytes_per_rank);

// Minimises the slowest stage's cost subject to every stage fitting its capacity (then, as balance(),
// the most even split, earlier stages lighter). Exact; O(S n^2) time. Throws when no split
// fits, naming the budget, the micro-batches in flight and the largest layer.
Partition partition_within_memory(const std::vector<double>& costs, const std::vector<LayerMemory>& memory,
                                  const MemoryLimit& limit, const std::string& cost_name = "cost");

// By layer count: stage sizes differ by at most one, the larger ones last.
Partition partition_uniform(int64_t num_layers, int64_t stages);
// By each layer's parameter count (a weight tied between two layers counts for both: each stage that
// holds it keeps a copy).
Partition partition_by_parameters(const Layers& layers, int64_t stages);
// By costs you give, one per layer (measured, estimated, or made up in a test).
Partition partition_by_cost(const std::vector<double>& costs, int64_t stages, const std::string& cost_name = "cost");
// By time measured on `sample_input`: profile_layers(), then partition_by_cost().
Partition partition_by_time(const Layers& layers, int64_t stages, const Tensor& sample_input);

// Runs the layers in order on `sample_input` (each layer's input is the previous one's output) and
// returns each layer's forward + backward time in seconds. The chain runs once untimed to warm up
// (first-touch allocations, lazily created GPU handles), then five times timed; each layer's time
// is its median. GPU work is synchronised
// around each layer. Backward starts from a gradient of ones on the layer's output and reaches the
// layer's parameters and its (floating-point) input.
std::vector<double> profile_layers(const Layers& layers, const Tensor& sample_input);

// The same pass, also measuring what each layer's forward leaves for its backward (its saved
// tensors and its output: the bytes allocated during the forward and still held after it; on a GPU
// from the caching allocator's count, so nothing else may use the device meanwhile).
struct LayerProfile {
  double seconds = 0;          // forward + backward, median
  double forward_seconds = 0;  // the forward alone, median (recomputation runs it once more)
  int64_t stash_bytes = 0;     // one micro-batch of sample_input's size
};
std::vector<LayerProfile> profile_layer_costs(const Layers& layers, const Tensor& sample_input);

// The layers of one stage, in order.
Layers stage_layers(const Layers& layers, const Partition& partition, int64_t stage);

// A table, one line per stage: its rank (where `layout` places it), its layers (index range and
// names), their parameters, the estimated cost (in the partition's unit, and as a share of the total)
// and memory (bytes of parameters and buffers the stage holds; training adds a gradient per parameter
// and the optimizer's state, e.g. AdamW's two moments).
std::string describe_partition(const Partition& partition, const Layers& layers, const Layout& layout);
// The same with `ranks` ranks holding the stages interleaved (stage % ranks); 0: one stage per rank.
std::string describe_partition(const Partition& partition, const Layers& layers, int64_t ranks = 0);

}  // namespace brigade::pipeline
