#include "autograd/tape.h"

#include <unordered_map>
#include <unordered_set>

#include "autograd/autocast.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

thread_local Tape* t_active_tape = nullptr;
thread_local bool t_grad_enabled = true;

// Adds g into the leaf's .grad. The first contribution is copied, so .grad never aliases a tensor
// the user or another gradient holds.
void accumulate_into_leaf(const Tensor& leaf, const Tensor& g) {
  NoGradGuard no_grad;
  Tensor current = leaf.grad();
  if (!current.defined()) {
    Tensor fresh = ops::to_dtype(g, leaf.dtype());
    leaf.impl().grad = (fresh.same_as(g) ? ops::clone(g) : fresh).impl_ptr();
  } else {
    ops::add_(current, g);
  }
}

NodeInput input_of(const Tensor& t) {
  NodeInput in;
  if (!t.defined()) return in;
  in.defined = true;
  in.id = t.impl().id;
  in.requires_grad = t.requires_grad();
  in.is_leaf = t.is_leaf();
  in.shape = t.shape();
  in.version = t.storage().version();
  if (in.is_leaf) in.leaf = t;
  else in.watched = t.impl_ptr();
  return in;
}

// A backward that reads a saved input which was modified in place since would compute a wrong
// gradient without any sign of it; refuse instead. (An input nobody holds any more cannot have been
// written since it was dropped, and its backward does not read it.)
// That parenthesis is a contract on the ops: a backward closure saves the very input Tensor the node
// lists (or nothing of it, or its output), never another handle to its storage (x.detach(), a view
// of x), which would keep the bytes alive and writable after the watched Tensor is gone, unseen
// here. Every closure in autograd/functions keeps to it; a new op that must save another handle
// should save the input itself as well.
void check_versions(const Node& node) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const NodeInput& in = node.inputs[i];
    if (!in.defined) continue;
    const std::shared_ptr<TensorImpl> live = in.leaf.defined() ? in.leaf.impl_ptr() : in.watched.lock();
    if (live && live->storage.version() != in.version)
      fail("backward of ", node.name, ": input ", i, " (shape ", shape_str(in.shape),
           ") was modified in place after ", node.name, " used it; clone it before modifying it");
  }
}

bool wants_grad(const NodeInput& in) { return in.defined && in.requires_grad; }

// What a node keeps (its closure's saved tensors, its inputs) is released once nothing will call it.
void release(Node& node) {
  node.backward = nullptr;
  node.inputs.clear();
}

}  // namespace

Tape* active_tape() { return t_active_tape; }
bool grad_enabled() { return t_grad_enabled; }

TapeGuard::TapeGuard(Tape& tape) : previous_(t_active_tape) { t_active_tape = &tape; }
TapeGuard::~TapeGuard() { t_active_tape = previous_; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool should_record(const std::vector<Tensor>& inputs) {
  if (t_active_tape == nullptr || !t_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward) {
  if (!should_record(inputs)) return false;
  Node node;
  node.name = name;
  for (const Tensor& in : inputs) node.inputs.push_back(input_of(in));
  for (const Tensor& out : outputs) {
    out.impl().requires_grad = true;
    out.impl().is_leaf = false;
    node.output_ids.push_back(out.impl().id);
    node.output_shapes.push_back(out.shape());
    node.output_dtypes.push_back(out.dtype());
    node.output_devices.push_back(out.device());
  }
  node.backward = std::move(backward);
  t_active_tape->append(std::move(node));
  return true;
}

void Tape::backward(const Tensor& loss, bool retain) {
  BRIGADE_CHECK(loss.defined() && loss.numel() == 1, "backward: expected a one-element loss, got shape ",
                loss.defined() ? shape_str(loss.shape()) : std::string("(undefined)"),
                "; pass explicit gradients for other outputs");
  backward({loss}, {ones(loss.shape(), loss.dtype(), loss.device())}, retain);
}

void Tape::backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain) {
  BRIGADE_CHECK(!awaiting_weight_, "backward: this tape is between backward_input and backward_weight");
  run(roots, root_grads, Phase::all, {}, retain);
  if (!retain) clear();
}

void Tape::backward_input(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                          const std::vector<Tensor>& inputs) {
  BRIGADE_CHECK(!awaiting_weight_, "backward_input: called twice without backward_weight in between");
  run(roots, root_grads, Phase::input, inputs, false);
  awaiting_weight_ = true;
}

void Tape::backward_weight() {
  BRIGADE_CHECK(awaiting_weight_, "backward_weight: backward_input has not run on this tape");
  run({}, {}, Phase::weight, {}, false);
  awaiting_weight_ = false;
  clear();
}

void Tape::clear() {
  nodes_.clear();
  weight_grads_.clear();
  awaiting_weight_ = false;
}

void Tape::run(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, Phase phase,
               const std::vector<Tensor>& phase_inputs, bool retain) {
  NoGradGuard no_grad;  // backward computations are never themselves recorded
  Autocast no_autocast(std::nullopt);  // backward functions use the dtypes the forward recorded

  if (phase == Phase::weight) {
    // The held-back work, in reverse recording order (so every tensor's gradient is complete before
    // its producer runs, and sums form in the order a full backward forms them): the weight halves
    // of the nodes phase 1 split, and the weight-only nodes phase 1 skipped (a bf16 copy of an f32
    // weight: its cast back runs here), seeded with the gradients phase 1 left for them.
    std::unordered_map<uint64_t, Tensor> grads = std::move(weight_grads_);
    weight_grads_.clear();
    auto add_grad = [&](const NodeInput& t, Tensor g) {
      if (t.is_leaf) return accumulate_into_leaf(t.leaf, std::move(g));
      Tensor& slot = grads[t.id];
      slot = slot.defined() ? ops::binary(ops::BinaryOp::add, slot, g) : std::move(g);
    };
    for (size_t n = nodes_.size(); n-- > 0;) {
      Node& node = nodes_[n];
      std::vector<Tensor> grad_outputs;
      std::vector<bool> want;
      if (!node.deferred_grad_outputs.empty()) {
        grad_outputs = std::move(node.deferred_grad_outputs);
        want = std::move(node.deferred_inputs);
        node.deferred_grad_outputs.clear();
        node.deferred_inputs.clear();
      } else if (node.backward) {
        bool any = false;
        grad_outputs.resize(node.output_ids.size());
        for (size_t o = 0; o < node.output_ids.size(); ++o) {
          auto it = grads.find(node.output_ids[o]);
          if (it == grads.end()) continue;
          grad_outputs[o] = it->second;
          grads.erase(it);
          any = true;
        }
        if (!any) continue;
        for (size_t o = 0; o < grad_outputs.size(); ++o)
          if (!grad_outputs[o].defined())
            grad_outputs[o] = zeros(node.output_shapes[o], node.output_dtypes[o], node.output_devices[o]);
        want.resize(node.inputs.size());
        for (size_t i = 0; i < node.inputs.size(); ++i) want[i] = wants_grad(node.inputs[i]);
      } else {
        continue;
      }
      check_versions(node);
      std::vector<Tensor> input_grads = node.backward(grad_outputs, want);
      grad_outputs.clear();
      for (size_t i = 0; i < want.size(); ++i)
        if (want[i] && input_grads.size() > i && input_grads[i].defined())
          add_grad(node.inputs[i], std::move(input_grads[i]));
      release(node);  // phase 2 is the last use of every node
    }
    BRIGADE_CHECK(grads.empty(), "backward_weight: ", grads.size(),
                  " weight-side gradient(s) found no producer on this tape");
    return;
  }

  BRIGADE_CHECK(roots.size() == root_grads.size(), "backward: ", roots.size(), " roots but ", root_grads.size(),
                " gradients");
  std::unordered_map<uint64_t, Tensor> grads;  // gradient so far of each non-leaf tensor, by id
  auto add_grad = [&](const NodeInput& t, Tensor g) {
    if (t.is_leaf) {
      accumulate_into_leaf(t.leaf, std::move(g));
      return;
    }
    Tensor& slot = grads[t.id];
    slot = slot.defined() ? ops::binary(ops::BinaryOp::add, slot, g) : std::move(g);
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    BRIGADE_CHECK(root.defined() && root.requires_grad(), "backward: root ", i,
                  " does not require grad (was it computed under a tape from inputs that require grad?)");
    BRIGADE_CHECK(root_grads[i].defined() && root_grads[i].shape() == root.shape(), "backward: gradient for root ", i,
                  " has shape ", root_grads[i].defined() ? shape_str(root_grads[i].shape()) : std::string("(undefined)"),
                  " but the root has shape ", shape_str(root.shape()));
    add_grad(input_of(root), root_grads[i]);
  }

  std::unordered_set<uint64_t> phase_input_ids;
  for (const Tensor& t : phase_inputs) phase_input_ids.insert(t.impl().id);
  // Phase 1 holds back the gradient of every "weight": a leaf that is not one of `phase_inputs`, or
  // a tensor computed from such leaves alone — a bf16 copy of an f32 parameter under mixed
  // precision is a non-leaf, but its gradient (a weight GEMM) is still weight work. One forward walk
  // over the nodes in recording order finds them.
  std::unordered_set<uint64_t> weight_only;
  auto is_weight = [&](const NodeInput& in) {
    return in.is_leaf ? !phase_input_ids.count(in.id) : weight_only.count(in.id) > 0;
  };
  if (phase == Phase::input) {
    for (const Node& node : nodes_) {
      if (!node.backward) continue;
      bool any = false, only_weights = true;
      for (const NodeInput& in : node.inputs) {
        if (!wants_grad(in)) continue;
        any = true;
        only_weights = only_weights && is_weight(in);
      }
      if (any && only_weights) weight_only.insert(node.output_ids.begin(), node.output_ids.end());
    }
  }

  // Without `retain`, a full backward frees each node once past it: every op that used its outputs
  // was recorded later, so its gradients are complete (or never coming).
  const bool free_as_we_go = phase == Phase::all && !retain;
  for (size_t n = nodes_.size(); n-- > 0;) {
    Node& node = nodes_[n];
    if (!node.backward) continue;  // already consumed by an earlier non-retained phase
    // A weight-only node is phase 2's: its outputs' gradients (say a root's) stay in `grads` and
    // are handed over below.
    if (phase == Phase::input && !node.output_ids.empty() && weight_only.count(node.output_ids[0])) continue;
    std::vector<Tensor> grad_outputs(node.output_ids.size());
    bool any = false;
    for (size_t o = 0; o < node.output_ids.size(); ++o) {
      auto it = grads.find(node.output_ids[o]);
      if (it == grads.end()) continue;
      grad_outputs[o] = std::move(it->second);
      grads.erase(it);  // each non-leaf's gradient is complete once its producer is reached
      any = true;
    }
    if (!any) {
      if (free_as_we_go) release(node);
      continue;
    }
    for (size_t o = 0; o < grad_outputs.size(); ++o)
      if (!grad_outputs[o].defined())
        grad_outputs[o] = zeros(node.output_shapes[o], node.output_dtypes[o], node.output_devices[o]);

    std::vector<bool> want(node.inputs.size()), deferred(node.inputs.size());
    bool any_want = false, any_deferred = false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const NodeInput& in = node.inputs[i];
      if (!wants_grad(in)) continue;
      if (phase == Phase::input && is_weight(in)) deferred[i] = any_deferred = true;  // waits for backward_weight
      else want[i] = any_want = true;
    }
    if (any_deferred) {
      node.deferred_grad_outputs = grad_outputs;
      node.deferred_inputs = deferred;
    }
    if (any_want) {
      check_versions(node);
      std::vector<Tensor> input_grads = node.backward(grad_outputs, want);
      grad_outputs.clear();  // the output gradients' last use (unless deferred, which holds its own)
      BRIGADE_CHECK(input_grads.size() == node.inputs.size(), "backward of ", node.name, " returned ",
                    input_grads.size(), " gradients for ", node.inputs.size(), " inputs");
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (!want[i] || !input_grads[i].defined()) continue;
        BRIGADE_CHECK(input_grads[i].shape() == node.inputs[i].shape, "backward of ", node.name,
                      ": gradient for input ", i, " has shape ", shape_str(input_grads[i].shape()),
                      " but the input has shape ", shape_str(node.inputs[i].shape));
        add_grad(node.inputs[i], std::move(input_grads[i]));
      }
    }
    // Nothing is left for a later phase or a replay: free what this node saved (activations) now.
    if (free_as_we_go || (phase == Phase::input && !any_deferred)) release(node);
  }
  if (phase == Phase::input) {
    for (auto it = grads.begin(); it != grads.end();) {
      if (weight_only.count(it->first)) {
        weight_grads_.insert(*it);
        it = grads.erase(it);
      } else {
        ++it;
      }
    }
  }
  // A gradient nobody consumed belongs to a tensor whose producer is not on this tape: it was made
  // under another tape (or one already freed). Dropping it silently would lose gradients.
  BRIGADE_CHECK(grads.empty(), "backward: ", grads.size(),
                " tensor(s) reached by the gradient were not produced on this tape (recorded on another "
                "tape, or on one already freed); their gradients cannot flow further");
}

}  // namespace brigade
