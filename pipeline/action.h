// Action: one step of one rank in a pipeline schedule.
//
// A pipeline-parallel model is cut into S = P * V *stages*: P ranks (processes, GPUs) each hold V
// *chunks*. Where chunk c of rank r sits in the model is the layout's *placement*:
//
//   interleaved (Megatron)   s = c * P + r               rank r holds r, r + P, r + 2P, ...
//   v_shape (ZB-V)           s = c * P + r      c even   chunk 0 goes down the ranks, chunk 1 comes
//                            s = c * P + P-1-r  c odd    back up: rank r holds r and 2P-1-r
//
// In the V, stages P-1 and P are both on rank P-1 and stages 0 and 2P-1 both on rank 0: a
// micro-batch turns round on the last rank without a message, and the first rank holds the model's
// two ends (the embedding and the head).
//
// A micro-batch flows forward through stages 0, 1, ..., S-1, then backward through S-1, ..., 0.
// A schedule says, for every rank, in which order it runs its compute — forward F, backward B (or,
// for zero-bubble schedules, B split into I, the gradient of the chunk's input, and W, the gradient
// of its weights) — and the messages that compute implies: the activation a stage sends to the next
// stage, and the gradient it sends back to the previous one. See pipeline/schedule.h.
#pragma once

#include <cstdint>
#include <string>

namespace brigade::pipeline {

enum class ActionKind : uint8_t {
  forward,          // F: run the chunk forward, stash what its backward needs
  backward,         // B: the whole backward (input and weight gradients) in one go
  backward_input,   // I: only the gradient of the chunk's input — what the previous stage waits for
  backward_weight,  // W: the weight gradients, from what I saved; frees the stash
  send_activation,  // the output of F, to the rank of the next stage
  recv_activation,  // the input of F, from the rank of the previous stage
  send_gradient,    // the input gradient from B or I, to the rank of the previous stage
  recv_gradient,    // the output gradient B or I starts from, from the rank of the next stage
};

struct Action {
  ActionKind kind;
  int microbatch = 0;
  int chunk = 0;  // which of the rank's V chunks (0 when every rank holds one)
  // On an F: it and the B or I right after it on the rank form one *overlapped pair* (DualPipeV's
  // F&B: one micro-batch's forward beside another's backward, so each hides the other's
  // communication). Both take their inputs before the pair and send after it; brigade runs the two
  // back to back (as PyTorch's runtime does) — the pairing shapes where messages go, not the math.
  bool overlapped = false;

  bool operator==(const Action&) const = default;
};

inline Action F(int microbatch, int chunk = 0) { return {ActionKind::forward, microbatch, chunk}; }
inline Action B(int microbatch, int chunk = 0) { return {ActionKind::backward, microbatch, chunk}; }
inline Action I(int microbatch, int chunk = 0) { return {ActionKind::backward_input, microbatch, chunk}; }
inline Action W(int microbatch, int chunk = 0) { return {ActionKind::backward_weight, microbatch, chunk}; }

// F, B, I and W run model code; the other four move a tensor between ranks.
inline bool is_compute(ActionKind k) { return k <= ActionKind::backward_weight; }
inline bool is_send(ActionKind k) { return k == ActionKind::send_activation || k == ActionKind::send_gradient; }
inline bool is_recv(ActionKind k) { return k == ActionKind::recv_activation || k == ActionKind::recv_gradient; }

// How a rank's chunks map to global stages (see the top of this file).
enum class Placement : uint8_t {
  interleaved,  // stage = chunk * P + rank
  v_shape,      // odd chunks run the ranks backwards: stage = chunk * P + P-1-rank
};

// Where the stages live: P ranks with V chunks each, placed as `placement` says. Every stage <-> rank
// question goes through here, so a new placement changes nothing else.
struct Layout {
  int ranks = 1;   // P
  int chunks = 1;  // V
  Placement placement = Placement::interleaved;

  // Equal when they put the same stages on the same ranks: with one rank or one chunk per rank
  // every placement is the same.
  bool operator==(const Layout& o) const {
    return ranks == o.ranks && chunks == o.chunks && (placement == o.placement || ranks == 1 || chunks == 1);
  }

  int stages() const { return ranks * chunks; }
  int stage(int rank, int chunk) const { return chunk * ranks + position(rank, chunk); }
  int rank_of(int stage) const { return position(stage % ranks, stage / ranks); }
  int chunk_of(int stage) const { return stage / ranks; }
  // Where `rank` stands among chunk `chunk`'s P consecutive stages (0: the first). Its own inverse —
  // the rank standing at offset i is position(i, chunk) — so rank_of() uses it too.
  int position(int rank, int chunk) const {
    return placement == Placement::v_shape && chunk % 2 == 1 ? ranks - 1 - rank : rank;
  }
  // The stage on the other end of a SEND or RECV run by `rank` (the next stage for activations
  // sent and gradients received, the previous one otherwise); -1 when there is none (the message
  // would leave the pipeline) or for compute actions.
  int peer_stage(const Action& a, int rank) const;
};

// Terse, for grids and charts: "F3", "I3.1" (micro-batch 3, chunk 1), "sendA3>1" (activation to
// rank 1), "recvG3<2" (gradient from rank 2), "F3.0&" (an F overlapped with the backward after it).
// The chunk is shown when the layout has V > 1.
std::string short_name(const Action& a, int rank, const Layout& layout);
// For error messages: "B(micro-batch 3, chunk 1 = stage 5)", "RECV activation of micro-batch 3 for
// stage 2 from rank 1 (stage 1)".
std::string describe(const Action& a, int rank, const Layout& layout);
// "forward", "backward", "backward-input", ... (the kind alone).
const char* kind_name(ActionKind k);

}  // namespace brigade::pipeline
