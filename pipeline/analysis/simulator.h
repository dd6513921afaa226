// The dry-run simulator: executes every rank's action list with per-action costs, checks that the
// schedule is correct, and measures it.
//
// Time model. Each rank runs its list in order, one action at a time. F, B, I and W take their cost;
// a SEND takes no time on the sender and its message can be received `communication` time units
// later; a RECV waits until its message is there. Messages from one rank to another are received in
// the order they were sent, separately for activations and gradients (as NCCL matches point-to-point
// messages). Nothing else waits, so a rank is idle only while a RECV waits.
//
// Checks. Every action must find what it needs on its rank: F the activation of the previous stage
// (received, or computed on this rank when both stages live here), B and I the gradient of the next
// stage (or, on the last stage, just their own F: the loss), W its I, a SEND the tensor it sends. A
// RECV must get exactly the message it expects next from its peer. An overlapped F (DualPipeV's
// F&B pairs) must be followed directly by the B or I it pairs with; the two run back to back. At the end every micro-batch must
// have run F and B (or I and W) exactly once on every stage — in a forward-only schedule
// (Schedule::forward_only: evaluation) F alone, which stashes nothing — and every message must have been
// received. A RECV that can never complete is a deadlock: either its peer never sends the message,
// or ranks wait for each other in a cycle. Every failure throws ScheduleError, whose message prints
// the whole rank x step grid with the offending action marked (pipeline/grid.h).
//
// Measures. The bubble fraction is the idle share of the P ranks over the step:
//   bubble = 1 - (sum of the ranks' busy time) / (P * makespan)
// (for 1F1B with equal stages, (P-1)/(M+P-1)). Activations: a stage stashes one micro-batch's
// activations from its F until its backward on that stage is done — at B, or at W for split schedules,
// because W needs the layer inputs again (ZB-H1 keeps them until W; docs/pipeline.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "pipeline/schedule.h"

namespace brigade::pipeline {

// One stage's compute costs. A pipeline whose stages differ (an embedding or a head alone on a stage,
// an uneven split) runs at the pace of its slowest stage; one mean cost for all would hide that.
struct StageCost {
  double forward = 1;
  double backward = 1;  // I
  double weight = 1;    // W
};

struct Costs {
  double forward = 1;        // F, per chunk
  double backward = 1;       // I: the input-gradient half of a backward
  double weight = 1;         // W: the weight-gradient half
  double communication = 0;  // from the end of a SEND until its message can be received
  // Per global stage (P*V entries) when the stages differ; empty: every stage costs the three above.
  std::vector<StageCost> stages;

  // Stage `s`'s costs: its own entry, or the uniform ones.
  StageCost of(int stage) const {
    return stages.empty() ? StageCost{forward, backward, weight} : stages.at(size_t(stage));
  }
  // B does both halves in one action, so a split and an unsplit schedule do the same total work.
  double full_backward() const { return backward + weight; }
  double full_backward(int stage) const { return of(stage).backward + of(stage).weight; }
  // Throws naming the stage (or the uniform cost) that is negative or not finite, or a count of
  // per-stage costs other than `stages`.
  void check(int num_stages) const;
};

struct TimedAction {
  Action action;
  double start = 0;
  double end = 0;  // for a RECV: when its message was there (end - start is time spent waiting)
};

struct SimulationResult {
  std::vector<std::vector<TimedAction>> timeline;  // [rank], in the schedule's order
  double makespan = 0;                             // when the last rank finished
  std::vector<double> busy;                        // compute time per rank
  double bubble_fraction = 0;                      // 1 - sum(busy) / (P * makespan)
  double bubble_ratio = 0;                         // idle / busy: (P-1)/M for 1F1B
  std::vector<int> peak_activations;               // per global stage: most micro-batches stashed at once
  std::vector<int> peak_activations_per_rank;      // the same over all of a rank's chunks together
  int64_t activation_messages = 0;                 // SENDs between ranks of activations...
  int64_t gradient_messages = 0;                   // ...and of gradients
  int64_t bytes = 0;                               // messages x activation_bytes

  int64_t messages() const { return activation_messages + gradient_messages; }
};

// A schedule that cannot run: a dependency violation, a mismatched message or a deadlock. what()
// holds the problem and the marked grid; the fields say which action (step == the rank's list length
// when something is missing at the end of the list).
class ScheduleError : public Error {
 public:
  ScheduleError(const std::string& what, std::string problem, int rank, int step)
      : Error(what), problem(std::move(problem)), rank(rank), step(step) {}
  std::string problem;  // one line, without the grid
  int rank;
  int step;
};

// Runs the schedule. `activation_bytes` is the size of one activation message (a gradient has the
// same size); it only feeds SimulationResult::bytes. Costs must be finite and non-negative, with
// either no per-stage costs or one per global stage.
SimulationResult simulate(const Schedule& schedule, const Costs& costs = {}, int64_t activation_bytes = 0);

}  // namespace brigade::pipeline
