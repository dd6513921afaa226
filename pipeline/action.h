// Action: one step of one rank in a pipeline schedule.
//
// A pipeline-parallel model is cut into S = P * V *stages*: P ranks (processes, GPUs) each hold V
// *chunks*. With the Megatron interleaved layout, chunk c of rank r is global stage
//
//   s = c * P + r        (so rank r holds stages r, r + P, r + 2P, ...: non-adjacent)
//
// and a micro-batch flows forward through stages 0, 1, ..., S-1, then backward through S-1, ..., 0.
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

// Where the stages live: P ranks with V chunks each, stage s = chunk * P + rank.
struct Layout {
  int ranks = 1;   // P
  int chunks = 1;  // V

  int stages() const { return ranks * chunks; }
  int stage(int rank, int chunk) const { return chunk * ranks + rank; }
  int rank_of(int stage) const { return stage % ranks; }
  int chunk_of(int stage) const { return stage / ranks; }
  // The stage on the other end of a SEND or RECV run by `rank` (the next stage for activations
  // sent and gradients received, the previous one otherwise); -1 when there is none (the message
  // would leave the pipeline) or for compute actions.
  int peer_stage(const Action& a, int rank) const;
};

// Terse, for grids and charts: "F3", "I3.1" (micro-batch 3, chunk 1), "sendA3>1" (activation to
// rank 1), "recvG3<2" (gradient from rank 2). The chunk is shown when the layout has V > 1.
std::string short_name(const Action& a, int rank, const Layout& layout);
// For error messages: "B(micro-batch 3, chunk 1 = stage 5)", "RECV activation of micro-batch 3 for
// stage 2 from rank 1 (stage 1)".
std::string describe(const Action& a, int rank, const Layout& layout);
// "forward", "backward", "backward-input", ... (the kind alone).
const char* kind_name(ActionKind k);

}  // namespace brigade::pipeline
