// Schedules as data: for every rank, the ordered list of actions it runs for one training step.
//
// A Schedule is just P lists of Actions (pipeline/action.h). Nothing about it is executable: the
// simulator (pipeline/analysis/simulator.h) dry-runs it with per-action costs, checks every dependency and
// measures the bubble; a runtime would walk the same lists with real tensors. Keeping the two apart
// is what makes a schedule testable without GPUs, threads or timing.
//
// The generators below write only the compute order (F, B, I, W) — that is the whole difference
// between schedules — and add_communication() then inserts the messages that order implies: a SEND
// right after the action that produced the tensor, a RECV right before the action that needs it.
// A SEND never blocks (it is queued, like an isend); a RECV waits for its message. Messages between
// two ranks are matched in order, per kind (activations and gradients are separate queues) — as
// point-to-point messages are in NCCL — so a schedule must receive in the order its peer sends.
//
// The five schedules, for P ranks and M micro-batches (F = B = 1 time unit, W folded into B):
//
//   naive        one micro-batch at a time through the whole pipe     bubble (P-1)/P
//   gpipe        all forwards, then all backwards                     bubble (P-1)/(M+P-1), M stashed
//   1f1b         P-r-1 warm-up forwards, then alternate F and B       bubble (P-1)/(M+P-1), P-r stashed
//   interleaved  1f1b over V chunks per rank (Megatron)               bubble (P-1)/(V*M+P-1)
//   zb-h1        1f1b with B split into I and W; W fills the bubbles  a third of 1f1b's idle time
//
// (the bubble is the idle share of P x the step's duration; see docs/pipeline.md.)
#pragma once

#include <string>
#include <vector>

#include "pipeline/action.h"

namespace brigade::pipeline {

enum class ScheduleKind { naive, gpipe, one_f_one_b, interleaved, zb_h1 };

struct Schedule {
  std::string name;  // "1f1b", or anything for a hand-written schedule
  Layout layout;     // P ranks, V chunks each
  int microbatches = 1;
  std::vector<std::vector<Action>> actions;  // actions[rank], in the order the rank runs them

  int ranks() const { return layout.ranks; }
  int chunks() const { return layout.chunks; }
  int stages() const { return layout.stages(); }
  // True when backward is split into I and W (zero-bubble schedules).
  bool split_backward() const;
};

// "naive", "gpipe", "1f1b", "interleaved", "zb-h1" (the names the CLI takes).
const char* schedule_name(ScheduleKind kind);
// The inverse; throws an Error listing the valid names.
ScheduleKind parse_schedule_kind(const std::string& name);
// Every kind, in the order above.
const std::vector<ScheduleKind>& all_schedule_kinds();

// The schedule of `kind` for `ranks` ranks, `microbatches` micro-batches and `chunks` chunks per
// rank, with its communication. Throws an Error naming P, M and V for a configuration the schedule
// cannot run: every kind needs P, M, V >= 1; only interleaved takes V > 1, and it needs V >= 2 and
// M a multiple of P (Megatron's rule: micro-batches go round the ranks in groups of P).
Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int chunks = 1);

// The compute-only orders (no SEND/RECV), one function per kind. Arguments are checked as above.
Schedule naive_order(int ranks, int microbatches);
Schedule gpipe_order(int ranks, int microbatches);
Schedule one_f_one_b_order(int ranks, int microbatches);
Schedule interleaved_order(int ranks, int microbatches, int chunks);
Schedule zb_h1_order(int ranks, int microbatches);

// Where add_communication puts the messages.
enum class MessagePlacement {
  // A RECV right before the action that needs the tensor, a SEND right after the one that made it.
  // The simulator's buffered sends are happy with any order; under rendezvous sends (gloo, NCCL) this
  // is safe for naive, gpipe, 1f1b, zb-h1, and interleaved with M = P (see pipeline/exchange.h).
  next_to_actions,
  // Megatron's interleaved steady state: an F and the B (or I) right after it form one iteration, and
  // between two iterations sits ONE run of messages — the previous iteration's SENDs (its activation
  // and its input gradient) and the next one's RECVs. The runtime makes that run one exchange, so
  // the neighbours trade all four tensors at once. next_to_actions would split them into two
  // exchanges (send A + receive G, then send G + receive A), and with interleaved's wrap-around from
  // the last rank to the first, M >= 2P makes those wait for each other in a cycle. The price: an
  // F's output leaves after the B that follows it, and an F waits for the B's gradient. With
  // interleaved's warm-up of 2(P-r-1) + (V-1)P forwards the unit-cost bubble is still
  // (P-1)/(VM+P-1) (tests/test_pipeline_schedule.cpp checks P <= 8, M <= 32, V <= 4).
  per_iteration,
};

// Inserts, on every rank, a SEND for each F whose output goes to another rank (and each B or I whose
// input gradient does), and a RECV for each F, B or I that needs a tensor from another rank, where
// `placement` says. Stages on the same rank (P = 1) hand tensors over without messages.
Schedule add_communication(Schedule compute_only, MessagePlacement placement = MessagePlacement::next_to_actions);

}  // namespace brigade::pipeline
