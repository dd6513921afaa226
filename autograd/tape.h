// The tape: a list of recorded ops, replayed in reverse to compute gradients.
//
// While a Tape is active on a thread (TapeGuard), every differentiable function whose inputs
// require grad appends a Node: which tensors went in, which came out, and a closure that maps output
// gradients to input gradients. backward() walks the nodes last to first, summing gradients per
// tensor, and accumulates the totals into leaf tensors (parameters, inputs) that require grad.
//
// Tapes are plain objects, so several can exist at once — the pipeline keeps one per in-flight
// micro-batch and replays them in whatever order its schedule says.
//
// Zero-bubble schedules split each backward into two phases: backward_input() computes gradients for
// the activations (and for the tensors you name, e.g. the stage input) and leaves the other leaves
// (the weights) for backward_weight(), which may run much later. The two phases together produce the
// same sums, in the same order, as backward().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace brigade {

// Maps gradients of a node's outputs to gradients of its inputs. `want[i]` says whether input i's
// gradient is needed now; entries not wanted may be left undefined (and should not be computed).
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs,
                                                     const std::vector<bool>& want)>;

// One input of a recorded op, as the backward walk needs it: where its gradient goes (a leaf's .grad,
// or the gradient slot of the tensor `id`), and its shape and version to check against. A leaf
// (a parameter, an input) is held, since its .grad is written; any other input is only watched: a
// backward reads what its closure captured, so a tensor the closure did not capture (the inputs of
// an add, the bf16 logits a cast to f32 read) is freed as soon as the forward drops it, instead of
// staying alive until the tape is.
struct NodeInput {
  Tensor leaf;                          // the input itself, when it is a leaf
  std::weak_ptr<TensorImpl> watched;    // a non-leaf input, for the version check while it lives
  uint64_t id = 0;
  bool defined = false, requires_grad = false, is_leaf = false;
  Shape shape;
  uint64_t version = 0;  // storage version when recorded (in-place writes bump it)
};

struct Node {
  std::string name;               // the op, for error messages and debugging
  std::vector<NodeInput> inputs;  // freed with the node: after its backward ran, unless retained
  std::vector<uint64_t> output_ids;
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
  std::vector<Device> output_devices;  // for the zeros of an output that got no gradient
  BackwardFn backward;
  // Set by backward_input for backward_weight: the output gradients seen, and which inputs wait.
  std::vector<Tensor> deferred_grad_outputs;
  std::vector<bool> deferred_inputs;
};

class Tape {
 public:
  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;
  Tape(Tape&&) = default;
  Tape& operator=(Tape&&) = default;

  // Full backward from scalar `loss` (gradient 1) or from `roots` with the given gradients.
  // Unless `retain`, each node is freed as soon as its backward has run — with it the activations
  // its closure saved — so the backward's memory falls as it goes (and the tape can't be replayed).
  void backward(const Tensor& loss, bool retain = false);
  void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain = false);

  // Phase 1 of a split backward: gradients flow through all recorded ops into every leaf listed in
  // `inputs` (accumulated into their .grad), but not into any other leaf — nor into tensors computed
  // from such leaves alone (a bf16 copy of an f32 weight): all of that is weight work, for phase 2.
  void backward_input(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                      const std::vector<Tensor>& inputs);
  // Phase 2: gradients for the remaining leaves (the weights), from what phase 1 saved. Frees the tape.
  void backward_weight();

  void clear();  // drops every node (and the tensors they keep alive)
  size_t size() const { return nodes_.size(); }
  bool empty() const { return nodes_.empty(); }
  const std::vector<Node>& nodes() const { return nodes_; }

  void append(Node node) { nodes_.push_back(std::move(node)); }  // what record() (below) adds

  // Runs `forward` with this tape active on this thread and returns its result: the one way to
  // record a step.
  //
  //   Tensor loss = tape.record([&] {
  //     Tensor err = model(x) - y;
  //     return mean(err * err);
  //   });
  //   tape.backward(loss);
  //
  // (The same as a TapeGuard around the forward, which the pipeline, holding a tape per micro-batch,
  // uses directly.)
  template <class Forward>
  auto record(Forward&& forward) -> decltype(forward());

 private:
  enum class Phase { all, input, weight };
  void run(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, Phase phase,
           const std::vector<Tensor>& phase_inputs, bool retain);

  std::vector<Node> nodes_;
  bool awaiting_weight_ = false;
  // Gradients phase 1 reached on weight-only tensors (computed from weights alone), for phase 2.
  std::unordered_map<uint64_t, Tensor> weight_grads_;
};

// Makes `tape` the active tape of this thread for the guard's lifetime (guards nest).
class TapeGuard {
 public:
  explicit TapeGuard(Tape& tape);
  ~TapeGuard();
  TapeGuard(const TapeGuard&) = delete;
  TapeGuard& operator=(const TapeGuard&) = delete;

 private:
  Tape* previous_;
};

template <class Forward>
auto Tape::record(Forward&& forward) -> decltype(forward()) {
  TapeGuard guard(*this);
  return forward();
}

// Disables recording on this thread for the guard's lifetime (guards nest).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

Tape* active_tape();      // null when none is active
bool grad_enabled();      // false inside a NoGradGuard

// The hook every differentiable function calls after computing its outputs: when a tape is active,
// grad is enabled and some input requires grad, it marks the outputs as requiring grad and appends
// a Node. Returns whether it recorded.
bool record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward);

// True when `record` would record for these inputs (lets a function skip saving state otherwise).
bool should_record(const std::vector<Tensor>& inputs);

}  // namespace brigade
