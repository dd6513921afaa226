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
// The seven schedules, for P ranks and M micro-batches (F = B = 1 time unit, W folded into B):
//
//   naive        one micro-batch at a time through the whole pipe     bubble (P-1)/P
//   gpipe        all forwards, then all backwards                     bubble (P-1)/(M+P-1), M stashed
//   1f1b         P-r-1 warm-up forwards, then alternate F and B       bubble (P-1)/(M+P-1), P-r stashed
//   interleaved  1f1b over V chunks per rank (Megatron)               bubble (P-1)/(V*M+P-1)
//   zb-h1        1f1b with B split into I and W; W fills the bubbles  a third of 1f1b's idle time
//   zb-v         two chunks per rank in a V, B split into I and W     bubble (P-1)/(6M+P-1) per chunk
//                                                                     F = I = W, M >= 2P; 1f1b's memory
//   dualpipev    the V with overlapped F&B pairs (DeepSeek)           M >= 2P; brigade runs a pair's
//                                                                     two halves back to back
//
// (the bubble is the idle share of P x the step's duration; see docs/pipeline.md.)
#pragma once

#include <string>
#include <vector>

#include "pipeline/action.h"

namespace brigade::pipeline {

enum class ScheduleKind { naive, gpipe, one_f_one_b, interleaved, zb_h1, zb_v, dualpipev };

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
  // True when no rank runs a backward (B, I or W): an evaluation pass (forward_only_schedule).
  bool forward_only() const;
};

// "naive", "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipev" (the names the CLI takes).
const char* schedule_name(ScheduleKind kind);
// The inverse; throws an Error listing the valid names.
ScheduleKind parse_schedule_kind(const std::string& name);
// Every kind, in the order above.
const std::vector<ScheduleKind>& all_schedule_kinds();
// "naive, gpipe, 1f1b, interleaved, zb-h1, zb-v or dualpipev": for messages listing the valid names.
std::string schedule_names();
// The chunks per rank a kind takes when none are asked for: 2 for interleaved, zb-v and dualpipev,
// else 1.
int default_chunks(ScheduleKind kind);
// Where a kind puts its chunks: the V for zb-v and dualpipev, interleaved for the others.
Placement placement_of(ScheduleKind kind);

// The schedule of `kind` for `ranks` ranks, `microbatches` micro-batches and `chunks` chunks per
// rank (0: the kind's default_chunks), with its communication. Throws an Error naming P, M and V for a configuration the schedule
// cannot run: every kind needs P, M, V >= 1; interleaved needs V >= 2 and M a multiple of P
// (Megatron's rule: micro-batches go round the ranks in groups of P); zb-v holds exactly V = 2 (any
// M >= 1 runs, but only M >= 2P fills the pipe); dualpipev holds V = 2 and needs M >= 2P; the others
// hold V = 1.
Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int chunks = 0);

// The compute-only orders (no SEND/RECV), one function per kind. Arguments are checked as above.
Schedule naive_order(int ranks, int microbatches);
Schedule gpipe_order(int ranks, int microbatches);
Schedule one_f_one_b_order(int ranks, int microbatches);
Schedule interleaved_order(int ranks, int microbatches, int chunks);
Schedule zb_h1_order(int ranks, int microbatches);
Schedule zb_v_order(int ranks, int microbatches);
Schedule dualpipev_order(int ranks, int microbatches);

// Forward only, for evaluation: every micro-batch through every stage of `layout` (any placement,
// any V), no backward. Each rank runs its forwards in the order of m + stage (the unit-cost time
// each could start if ranks never waited for each other; the lower stage first on a tie), which
// respects every micro-batch's path through the stages, so the order can always finish. Nothing is
// stashed: an F keeps nothing for a backward. forward_only_schedule() adds the messages in lock step
// (below), safe under rendezvous sends for every placement — next_to_actions would not be once the
// activations wrap round from the last rank to the first (V >= 2) with M > P. Named "forward".
Schedule forward_only_order(const Layout& layout, int microbatches);
Schedule forward_only_schedule(const Layout& layout, int microbatches);

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
  // Lock-step, as PyTorch's runtime pairs its messages: every compute action gets a time on a unit
  // clock — when it could start if F, I and W took one unit and B two (pipeline/slots.h) — and
  // whenever a step ends, the ranks trade, in one exchange each, what ended then: a rank's SENDs of
  // its own outputs and its RECVs of what its neighbours made for it. A RECV never comes later than
  // next_to_actions puts it. Every rank meets its partners at each time's exchange, so no compute
  // order can make ranks wait for each other under rendezvous sends (by induction over the times);
  // next_to_actions cannot promise that once two ranks send to each other both ways — zb-v's chunk
  // 0 sends activations down the ranks while its chunk 1 sends them back up, and with messages next
  // to their actions neighbours would both sit in a SEND. Under the simulator's default costs the
  // clock is the simulator's, so messages wait for nothing but their inputs. An overlapped pair's
  // messages go before and after the pair. Works for any order whose dependencies can be met
  // (hand-written ones included); throws StuckOrder (pipeline/slots.h) naming the stuck ranks
  // otherwise.
  lock_step,
};

// Inserts, on every rank, a SEND for each F whose output goes to another rank (and each B or I whose
// input gradient does), and a RECV for each F, B or I that needs a tensor from another rank, where
// `placement` says. Neighbouring stages on the same rank (P = 1; the turn of zb-v's V) hand tensors
// over without messages.
Schedule add_communication(Schedule compute_only, MessagePlacement placement = MessagePlacement::next_to_actions);

}  // namespace brigade::pipeline
