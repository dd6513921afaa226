// The planner: how to train a GPT on N devices — which pipeline, how many data-parallel replicas —
// found by asking the simulator (`brigade plan`, tools/plan/).
//
// A configuration (a Candidate) is P pipeline stages (ranks) x D data-parallel replicas = N devices,
// a schedule with V chunks per rank, M micro-batches per replica and step, and recomputation on or
// off. Evaluating one:
//   1. the layers' costs for a micro-batch of batch / (D M) sequences (gpt_costs.h): FLOPs / the
//      device's effective FLOP/s, recomputation adding a forward to each backward;
//   2. the split of the layers into P V stages: partition_within_memory, the fastest split whose every
//      rank fits the device's memory (plan_memory.h), given how many micro-batches each stage stashes
//      at once (the schedule's simulated stash peaks);
//   3. each rank's peak memory: predict_memory over the schedule (plan_memory.h's model). A
//      configuration with no split that fits, or a peak above the device's memory, is out of memory;
//   4. the step time: simulate() with each stage's costs and messages taking boundary bytes /
//      bandwidth + latency, then the gradient reductions as brigade's runtime runs them on NCCL: each
//      chunk's all-reduce across the D replicas (a ring: 2 (D-1)/D x its gradient bytes / bandwidth +
//      2 (D-1) latencies) starts once the chunk's last backward is done, one after another on the
//      rank's link, and the tied embedding is summed between its two ranks at the end. The step ends
//      when the last rank's reductions do.
//
// The search does not simulate everything. A rank cannot start before the first micro-batch's
// forward has reached its first stage, then computes for its busy time, and then the chunk it
// computed last still has to reduce (at least its cheapest chunk's reduction) and the tie: the
// largest such sum over the ranks is a lower bound on the step. Before the split is known, the
// average rank's compute (M x the whole model's cost / P = the step's work / N) is one too. The
// candidates are taken in the order of that cheap bound. Once the top k are known, one whose split's
// bound is above the k-th best step is skipped without simulating, and once the cheap bound is,
// every candidate after it too. Out-of-memory candidates are never simulated. The result equals
// simulating all of them (tests/test_plan.cpp checks that).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/analysis/gpt_costs.h"
#include "pipeline/schedule.h"

namespace brigade::pipeline {

struct Hardware {
  int devices = 8;
  int64_t memory = int64_t(80) << 30;  // bytes per device
  double flops = 240e12;               // effective FLOP/s per device (what a training step really reaches)
  double bandwidth = 200e9;            // bytes/s between two devices, each way
  double latency = 10e-6;              // seconds per message, on top of its bytes
};

struct PlanSpec {
  GptShape model;
  DType compute = DType::bf16;  // the activations' dtype; parameters and optimizer state are f32
  int64_t batch = 64;           // sequences per step, over all replicas
  Hardware hardware;
  std::vector<ScheduleKind> schedules = all_schedule_kinds();
  int max_chunks = 4;                         // interleaved: V from 2 up to this
  std::vector<bool> recompute = {false, true};  // the settings to try
};

struct Candidate {
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int stages = 1;        // P
  int chunks = 1;        // V per rank
  int microbatches = 1;  // M per replica
  int replicas = 1;      // D
  bool recompute = false;

  bool operator==(const Candidate&) const = default;
  // "1f1b P=4 V=1 M=8 D=2 recompute"
  std::string describe() const;
};

enum class Fit {
  fits,
  no_split,     // no split of the layers fits the memory: partition_within_memory found none
  over_memory,  // a split fits, but predict_memory's peak does not (never, while the overhead bounds it)
};

struct Evaluation {
  Candidate candidate;
  int64_t sequences = 0;              // per micro-batch
  std::vector<int64_t> bounds;        // the layers' split into P V stages (Partition::bounds)
  std::vector<int64_t> peak_per_rank;  // predicted, bytes
  int64_t peak = 0;                    // the largest of them
  Fit fit = Fit::fits;
  std::string problem;  // why it does not fit
  double lower_bound = 0;  // seconds: the busiest rank's compute and reductions
  bool simulated = false;
  // Seconds, once simulated: the step (pipeline, then the last rank's reductions), the pipeline alone
  // (the simulator's makespan) and the longest reduction; the bubble is the simulator's.
  double step = 0;
  double pipeline = 0;
  double all_reduce = 0;
  double bubble = 0;
  std::vector<double> reductions;  // seconds per rank: all its gradient reductions together

  bool fits() const { return fit == Fit::fits; }
};

// Every configuration the spec allows and the schedules can run, P x D = devices: D divides the
// batch, M divides the replica's batch, P V <= the model's pipeline layers, interleaved's M a
// multiple of P, the V schedules (zb-v, dualpipev) M >= 2P (dualpipev needs it; zb-v fills its V only
// from there). With P = 1 every
// schedule runs each micro-batch's F and B on one device: only one is kept, the first the spec lists
// of 1f1b, zb-h1, naive and gpipe (1f1b keeps one stash; gpipe keeps all M).
std::vector<Candidate> plan_candidates(const PlanSpec& spec);

// One candidate, fully: split, memory, lower bound and simulated step (even when out of memory, with
// the fastest split that ignores memory). What the search's result is checked against.
Evaluation evaluate(const PlanSpec& spec, const Candidate& candidate);

// The order of a plan: configurations that fit first, then the shorter step, the smaller peak, and
// the candidate (fewer stages, the schedules' order, fewer chunks and micro-batches, no recomputation).
bool ranks_before(const Evaluation& a, const Evaluation& b);

struct Plan {
  std::vector<Evaluation> best;  // at most `top`, all fitting, in ranks_before order
  int64_t candidates = 0;        // plan_candidates' count
  int64_t out_of_memory = 0;     // found out of memory (not simulated)
  int64_t pruned = 0;            // skipped: their lower bound was above the k-th best step
  int64_t simulated = 0;
};

// When nothing fits: the least memory per device any candidate would need, and which.
class NoPlanError : public Error {
 public:
  NoPlanError(const std::string& what, int64_t needed, Candidate candidate)
      : Error(what), needed(needed), candidate(candidate) {}
  int64_t needed;
  Candidate candidate;
};

// The `top` best configurations. Throws NoPlanError when none fits (none with `devices` devices, or
// no candidate at all: a batch no replica count divides).
Plan plan(const PlanSpec& spec, int top);

// The least memory per device with which some candidate fits, and that candidate (what NoPlanError
// reports): for each, the smallest budget partition_within_memory accepts, plus the overhead.
int64_t least_memory_needed(const PlanSpec& spec, Candidate* candidate = nullptr);

// The fewest devices, up to `most`, on which some configuration fits the spec's device memory (its
// `devices` ignored): `devices` 0 when none up to `most` does. What it takes for a model too large
// for one device. Cheap: it sizes the splits (least_memory_needed) and simulates nothing.
struct FewestDevices {
  int devices = 0;
  Candidate candidate;  // one that fits on that many
  int64_t needed = 0;   // the memory per device it needs (at most the spec's)
};
FewestDevices fewest_devices(const PlanSpec& spec, int most);

}  // namespace brigade::pipeline
