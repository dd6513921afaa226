// Predicting each rank's peak memory over one training step, from what each stage holds.
//
// A rank holds, all step long, its stages' parameters, their optimizer state (AdamW: two moments
// per parameter), anything else it keeps (`resident`: in `brigade train` the step's batch, which
// every rank builds) and a transport's own buffers. On top of that, walking
// its actions in order (the order the simulator runs them; only sent gradients depend on timing):
//   F  stashes one micro-batch's activations of that stage (with recomputation: only its input);
//   B  frees that stash when done; I keeps it (W reads the layer inputs again) and adds what W
//      needs besides (`deferred`: the gradients of the layers' outputs), and W frees both;
//   the first B or W of a stage creates its gradients, which stay until the optimizer step;
//   a RECV of a gradient (or of an activation) holds its message buffer until the stage's B or W
//      that uses it has run (0 bytes when the transport hands the sender's tensor over instead);
//   a gradient a backward sends may stay with its sender until the receiver takes it (`gradient_out`:
//      the threads' transport hands the tensor itself over): from the B or I that makes it until the
//      end of the receiver's RECV — a time, so only with a simulated timeline to read it from;
//   any action may briefly use `workspace` bytes beyond what it keeps (temporaries of a backward).
// The peak is the most those add up to during any action. Sizes are bytes; what they are measured
// or estimated from is the caller's business (brigade train measures them; docs/pipeline.md).
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/analysis/simulator.h"
#include "pipeline/schedule.h"

namespace brigade::pipeline {

struct StageMemory {
  int64_t parameters = 0;   // parameters and buffers
  int64_t gradients = 0;    // one per trainable parameter, from the stage's first B or W
  int64_t optimizer = 0;    // optimizer state (AdamW: 2 x the f32 parameter bytes)
  int64_t activations = 0;    // one micro-batch's stash
  int64_t deferred = 0;       // what an I keeps for its W on top of the stash (split schedules)
  int64_t gradient_in = 0;    // a received gradient message (the gradient of the stage's output)
  int64_t activation_in = 0;  // a received activation message (the stage's input)
  int64_t gradient_out = 0;   // a sent gradient, while its receiver has not taken it
  int64_t workspace = 0;      // the most one of its actions uses for a moment beyond what it keeps
};

struct MemoryModel {
  std::vector<StageMemory> stages;  // one per global stage (P*V)
  std::vector<int64_t> resident;    // per rank, held all step besides its stages; empty: none
  int64_t communication = 0;        // per rank: buffers held all step (a transport's own)
};

// A rank's peak and what makes it up at that moment: peak = states + gradients + activations + workspace.
struct RankMemory {
  int64_t states = 0;       // parameters + optimizer state + resident + communication: held all step
  int64_t gradients = 0;    // the gradients that exist by then
  int64_t activations = 0;  // stashed activations and the message buffers held
  int64_t workspace = 0;    // the action's own
  int64_t peak = 0;         // the most held during any action
  int peak_step = -1;       // the action (index in the rank's list) during which the peak is reached
};

// Throws naming the stage or rank whose size is negative, or a wrong count of stages or ranks.
// `timing`: simulate(schedule, costs) — when the receivers take the gradients sent to them; without
// it gradient_out is not counted.
std::vector<RankMemory> predict_memory(const Schedule& schedule, const MemoryModel& model,
                                       const SimulationResult* timing = nullptr);

}  // namespace brigade::pipeline
