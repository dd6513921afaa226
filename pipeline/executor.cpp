#include "pipeline/executor.h"

#include <algorithm>
#include <set>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/stream.h"
#include "kernels/ops.h"
#include "pipeline/action_timer.h"
#include "pipeline/exchange.h"
#include "pipeline/analysis/simulator.h"

namespace brigade::pipeline {

// What crosses one stage boundary for one micro-batch: the stage's output, then the skip tensors in
// the order of ExecutorOptions::skips. In a gradient bundle, entries that are not floating point
// stay undefined (nothing flows back into token ids).
struct Executor::Bundle {
  std::vector<Tensor> tensors;  // [0] the output; [1 + i] the i-th skip crossing the boundary
};

// One (stage, micro-batch) between its F and the end of its backward: what the backward needs.
struct Executor::Work {
  std::vector<Tensor> inputs;   // the stage's input bundle, as leaves (floating ones require grad)
  std::vector<Tensor> outputs;  // its output bundle; on the last stage [0] is the loss
  // Each output entry's tensor: the floating-point ones get a gradient of the same shape and dtype
  // back, so its receive is preset (comm::Shapes::preset) and needs no header.
  std::vector<comm::TensorMeta> sent;
  Tape tape;                    // empty until the backward when recomputing
  bool awaiting_weight = false; // I done, W not yet
  bool weight_phase = false;    // the tape holds a backward_weight to run
};

namespace {

// A received (or handed-over) tensor as a leaf of this stage's tape: the same data, no history, and
// requiring grad when it is floating point, so the backward leaves its gradient in .grad.
Tensor as_leaf(const Tensor& t) {
  Tensor leaf = t.detach();
  if (is_floating(leaf.dtype())) leaf.requires_grad_(true);
  return leaf;
}

// Every link the schedule sends on, (sender, receiver), the same list on every rank: computed from
// the whole schedule, which the caller has checked to list P ranks' actions.
std::vector<comm::Link> links_of(const Schedule& schedule) {
  const Layout& layout = schedule.layout;
  std::vector<comm::Link> links;
  for (int r = 0; r < int(schedule.actions.size()); ++r)
    for (const Action& a : schedule.actions[size_t(r)]) {
      const int peer = is_send(a.kind) ? layout.peer_stage(a, r) : -1;
      if (peer >= 0) links.push_back({r, layout.rank_of(peer)});  // -1: no such stage (run() refuses it)
    }
  return links;
}

}  // namespace

Executor::Executor(comm::Communicator& comm, Schedule schedule, std::vector<Chunk> chunks, LossFn loss,
                   ExecutorOptions options)
    : comm_(comm),
      schedule_(std::move(schedule)),
      chunks_(std::move(chunks)),
      loss_(std::move(loss)),
      options_(std::move(options)),
      rank_(comm.rank()) {
  const int P = schedule_.ranks(), V = schedule_.chunks(), S = schedule_.stages();
  BRIGADE_CHECK(comm_.size() == P, "pipeline executor: the schedule '", schedule_.name, "' has ", P,
                " ranks but the communicator has ", comm_.size(), " (rank ", rank_, ")");
  BRIGADE_CHECK(int(schedule_.actions.size()) == P, "pipeline executor: schedule '", schedule_.name, "' lists ",
                schedule_.actions.size(), " ranks' actions for P=", P);
  BRIGADE_CHECK(int(chunks_.size()) == V, "pipeline executor: rank ", rank_, " was given ", chunks_.size(),
                " chunks but the schedule '", schedule_.name, "' has V=", V, " chunks per rank");
  BRIGADE_CHECK(bool(loss_), "pipeline executor: no loss function");
  std::set<std::string> names;
  for (const Skip& k : options_.skips) {
    BRIGADE_CHECK(0 <= k.from && k.from < k.to && k.to < S, "pipeline executor: skip '", k.name, "' goes from stage ",
                  k.from, " to stage ", k.to, "; it needs 0 <= from < to < S=", S);
    BRIGADE_CHECK(names.insert(k.name).second, "pipeline executor: two skips are named '", k.name, "'");
  }
  forward_only_ = schedule_.forward_only();
  // Where each chunk's weight gradients are final: after its last B or W (I leaves the weights alone).
  last_weight_action_.assign(size_t(V), kNever);
  const auto& actions = schedule_.actions[size_t(rank_)];
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind == ActionKind::backward || actions[i].kind == ActionKind::backward_weight)
      last_weight_action_[size_t(actions[i].chunk)] = i;
  // Real NCCL connects a link (a peer and a direction) the first time a group uses it, and the host
  // waits in that group until the peer's group sets up the mirror direction (NCCL's source: see
  // comm/nccl.cpp, run_connect). Left to first use, a V with M < 2P waits in a cycle at its first
  // exchanges (zb-v P = 3, M = 1: rank 0's first header group needs a header rank 1 sends only after
  // two forwards that wait for rank 0), which neither the exchange model nor a schedule can avoid.
  // So every link is connected here, after the checks above (the list reads every rank's actions),
  // in matching groups on every rank; the transports that need nothing do nothing.
  if (options_.connect_links && P > 1) comm_.connect(links_of(schedule_));
}

Executor::~Executor() = default;

std::vector<int> Executor::weights_final_order() const {
  std::vector<int> order(chunks_.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = int(c);
  // A chunk without a backward is final from the start: kNever sorts it last, where run() reports it.
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return last_weight_action_[size_t(a)] < last_weight_action_[size_t(b)]; });
  return order;
}

std::vector<const Skip*> Executor::skips_over(int boundary) const {
  std::vector<const Skip*> out;
  for (const Skip& k : options_.skips)
    if (k.from <= boundary && boundary < k.to) out.push_back(&k);
  return out;
}

// Every (boundary, direction, bundle slot) is its own message channel, so each one keeps its own
// agreed shape (comm/handshake.h) and its messages arrive in order.
int Executor::tag(int boundary, bool gradient, size_t slot) const {
  const int slots = 1 + int(options_.skips.size());
  return options_.tag_base + (boundary * 2 + (gradient ? 1 : 0)) * slots + int(slot);
}

int Executor::stashed() const { return int(work_.size()); }

Executor::Work& Executor::work_at(const Key& key, const Action& a) {
  auto it = work_.find(key);
  BRIGADE_CHECK(it != work_.end(), "pipeline executor: ", describe(a, rank_, schedule_.layout),
                " has no forward to go back through (the schedule runs it before its F, or twice)");
  return *it->second;
}

Executor::Bundle Executor::run_layers(int stage, Work& work, int microbatch) {
  const Chunk& chunk = chunks_[size_t(schedule_.layout.chunk_of(stage))];
  const bool last = stage == schedule_.stages() - 1;
  const auto incoming = stage > 0 ? skips_over(stage - 1) : std::vector<const Skip*>{};
  const auto outgoing = last ? std::vector<const Skip*>{} : skips_over(stage);

  SkipScope scope;
  for (size_t i = 0; i < incoming.size(); ++i)
    if (incoming[i]->to == stage) scope.put(incoming[i]->name, work.inputs[1 + i]);

  Tensor x = work.inputs[0];
  for (const auto& layer : chunk.layers) x = (*layer)(x);  // under its compute dtype, recompute too

  Bundle out;
  if (last && !with_loss_) {
    out.tensors.push_back(keep_ ? keep_(x) : x);
  } else if (last) {
    const Tensor& target = targets_->at(size_t(microbatch));
    Tensor loss = loss_(x, target);
    BRIGADE_CHECK(loss.defined() && loss.numel() == 1, "pipeline: the loss function returned ",
                  loss.defined() ? shape_str(loss.shape()) : std::string("nothing"),
                  " for micro-batch ", microbatch, "; it must return a scalar");
    out.tensors.push_back(loss);
  } else {
    out.tensors.push_back(x);
  }
  for (const Skip* k : outgoing) {
    if (k->from == stage) {
      Tensor t = scope.take(k->name);
      BRIGADE_CHECK(t.defined(), "pipeline: stage ", stage, " should stash '", k->name,
                    "' (a skip to stage ", k->to, ") but none of its layers did");
      out.tensors.push_back(t);
    } else {
      // A skip passing through: the same leaf goes on, so its gradient comes straight back.
      auto pos = std::find(incoming.begin(), incoming.end(), k) - incoming.begin();
      out.tensors.push_back(work.inputs[1 + size_t(pos)]);
    }
  }
  const std::vector<std::string> left = scope.names();
  BRIGADE_CHECK(left.empty(), "pipeline: stage ", stage, " stashed '", left.front(),
                "' but no skip declared in the pipeline's options carries it from this stage");
  return out;
}

void Executor::forward(const Action& a) {
  const int s = schedule_.layout.stage(rank_, a.chunk);
  const Key key{s, a.microbatch};
  BRIGADE_CHECK(!work_.count(key), "pipeline executor: ", describe(a, rank_, schedule_.layout), " runs twice");
  auto work = std::make_unique<Work>();
  if (s == 0) {
    BRIGADE_CHECK(a.microbatch < int(inputs_->size()), "pipeline: rank ", rank_, " holds stage 0 and needs input ",
                  "micro-batch ", a.microbatch, " but was given ", inputs_->size(), " micro-batches");
    work->inputs.push_back((*inputs_)[size_t(a.microbatch)]);
  } else {
    auto it = arrived_.find(key);
    BRIGADE_CHECK(it != arrived_.end(), "pipeline executor: ", describe(a, rank_, schedule_.layout),
                  " found no activation from stage ", s - 1);
    for (const Tensor& t : it->second->tensors) work->inputs.push_back(forward_only_ ? t : as_leaf(t));
    arrived_.erase(it);
  }
  const bool last = s == schedule_.stages() - 1;
  if (last && with_loss_) {
    BRIGADE_CHECK(a.microbatch < int(targets_->size()), "pipeline: rank ", rank_, " holds the last stage and needs ",
                  "targets for micro-batch ", a.microbatch, " but was given ", targets_->size(), " micro-batches");
  }

  Bundle out;
  if (options_.recompute || forward_only_) {
    // Recomputing: keep nothing but the input; the backward runs the layers again. Forward only:
    // nothing at all.
    NoGradGuard no_grad;
    out = run_layers(s, *work, a.microbatch);
  } else {
    TapeGuard recording(work->tape);
    out = run_layers(s, *work, a.microbatch);
    work->outputs = out.tensors;
  }
  for (const Tensor& t : out.tensors) work->sent.push_back(comm::TensorMeta::of(t, comm::Shapes::preset));

  if (last) {
    // Kept on the device: reading it here (.item()) would make the host wait for this micro-batch
    // on a GPU, and the next actions would queue late. run() reads all of them once, at the end.
    losses_[size_t(a.microbatch)] = with_loss_ ? out.tensors[0].detach().reshape({1}) : out.tensors[0].detach();
  } else {
    auto bundle = std::make_shared<Bundle>(std::move(out));
    if (schedule_.layout.rank_of(s + 1) == rank_) arrived_[{s + 1, a.microbatch}] = bundle;
    else outgoing_[key] = bundle;
  }
  if (forward_only_) return;  // no backward will come for it
  work_[key] = std::move(work);
  peak_stashed_ = std::max(peak_stashed_, int(work_.size()));
}

void Executor::backward(const Action& a) {
  const int s = schedule_.layout.stage(rank_, a.chunk);
  const Key key{s, a.microbatch};
  Work& work = work_at(key, a);
  BRIGADE_CHECK(!work.awaiting_weight, "pipeline executor: ", describe(a, rank_, schedule_.layout),
                " runs a second time");
  const bool last = s == schedule_.stages() - 1;

  if (options_.recompute) {
    TapeGuard recording(work.tape);
    work.outputs = run_layers(s, work, a.microbatch).tensors;
  }

  // Roots: every output entry that depends on something trainable, with its gradient.
  std::vector<Tensor> roots, root_grads;
  if (last) {
    const Tensor& loss = work.outputs[0];
    if (loss.requires_grad()) {
      roots.push_back(loss);
      root_grads.push_back(full(loss.shape(), loss_scale_, loss.dtype(), loss.device()));
    }
  } else {
    auto it = arrived_grads_.find(key);
    BRIGADE_CHECK(it != arrived_grads_.end(), "pipeline executor: ", describe(a, rank_, schedule_.layout),
                  " found no gradient from stage ", s + 1);
    const std::vector<Tensor>& grads = it->second->tensors;
    for (size_t i = 0; i < work.outputs.size(); ++i) {
      if (i < grads.size() && grads[i].defined() && work.outputs[i].requires_grad()) {
        roots.push_back(work.outputs[i]);
        root_grads.push_back(grads[i]);
      }
    }
    arrived_grads_.erase(it);
  }

  std::vector<Tensor> leaves;  // the input entries that receive a gradient
  for (const Tensor& t : work.inputs)
    if (t.requires_grad()) leaves.push_back(t);
  const bool split = a.kind == ActionKind::backward_input;
  if (!roots.empty()) {
    if (split) work.tape.backward_input(roots, root_grads, leaves);
    else work.tape.backward(roots, root_grads);
    work.weight_phase = split;
  }

  if (s > 0) {
    auto grads = std::make_shared<Bundle>();
    for (const Tensor& t : work.inputs) {
      Tensor g;
      if (t.requires_grad()) g = t.grad().defined() ? t.grad() : zeros_like(t);
      grads->tensors.push_back(g);
    }
    if (schedule_.layout.rank_of(s - 1) == rank_) arrived_grads_[{s - 1, a.microbatch}] = grads;
    else outgoing_grads_[key] = grads;
  }

  if (split) {
    work.awaiting_weight = true;
    work.inputs.clear();  // the tape keeps what W needs
    work.outputs.clear();
  } else {
    work_.erase(key);  // drops the tape: the stash of this micro-batch is freed here
  }
}

void Executor::backward_weight(const Action& a) {
  const Key key{schedule_.layout.stage(rank_, a.chunk), a.microbatch};
  Work& work = work_at(key, a);
  BRIGADE_CHECK(work.awaiting_weight, "pipeline executor: ", describe(a, rank_, schedule_.layout),
                " runs before its backward-input");
  if (work.weight_phase) work.tape.backward_weight();
  work_.erase(key);
}

void Executor::exchange(const std::vector<Action>& messages) {
  const Layout& layout = schedule_.layout;
  const comm::Shapes shapes = options_.variable_shapes ? comm::Shapes::varying : comm::Shapes::fixed;
  struct Landing {
    Key key;
    bool gradient;
    size_t op_begin;
    size_t entries;
    std::vector<bool> present;  // for gradient bundles: which entries travel
  };
  std::vector<comm::P2P> ops;
  std::vector<Landing> landings;

  for (const Action& a : messages) {
    const int s = layout.stage(rank_, a.chunk);
    const int peer = layout.rank_of(layout.peer_stage(a, rank_));
    switch (a.kind) {
      case ActionKind::send_activation: {
        auto it = outgoing_.find({s, a.microbatch});
        BRIGADE_CHECK(it != outgoing_.end(), "pipeline executor: ", describe(a, rank_, layout), " has nothing to send");
        for (size_t i = 0; i < it->second->tensors.size(); ++i)
          ops.push_back(comm::P2P::send(it->second->tensors[i], peer, tag(s, false, i), shapes));
        outgoing_.erase(it);
        break;
      }
      case ActionKind::send_gradient: {
        auto it = outgoing_grads_.find({s, a.microbatch});
        BRIGADE_CHECK(it != outgoing_grads_.end(), "pipeline executor: ", describe(a, rank_, layout),
                      " has nothing to send");
        for (size_t i = 0; i < it->second->tensors.size(); ++i)
          if (it->second->tensors[i].defined())
            ops.push_back(comm::P2P::send(it->second->tensors[i], peer, tag(s - 1, true, i), comm::Shapes::preset));
        outgoing_grads_.erase(it);
        break;
      }
      case ActionKind::recv_activation: {
        const size_t entries = 1 + skips_over(s - 1).size();
        landings.push_back({{s, a.microbatch}, false, ops.size(), entries, {}});
        for (size_t i = 0; i < entries; ++i) ops.push_back(comm::P2P::recv(peer, tag(s - 1, false, i), shapes));
        break;
      }
      case ActionKind::recv_gradient: {
        // Gradients come back for exactly the floating-point entries this stage sent, each shaped like
        // its entry: the receive names its tensor, and no header has to reach this host first.
        Work& work = work_at({s, a.microbatch}, a);
        Landing landing{{s, a.microbatch}, true, ops.size(), work.sent.size(), {}};
        for (size_t i = 0; i < work.sent.size(); ++i) {
          const comm::TensorMeta& m = work.sent[i];
          landing.present.push_back(is_floating(m.dtype));
          if (landing.present.back())
            ops.push_back(comm::P2P::recv_into(empty(m.shape, m.dtype, comm_.device()), peer, tag(s, true, i),
                                               comm::Shapes::preset));
        }
        landings.push_back(std::move(landing));
        break;
      }
      default: fail("pipeline executor: ", describe(a, rank_, layout), " is not a message");
    }
  }

  comm_.exchange(ops);

  for (const Landing& l : landings) {
    auto bundle = std::make_shared<Bundle>();
    size_t op = l.op_begin;
    for (size_t i = 0; i < l.entries; ++i) {
      if (l.gradient && !l.present[i]) bundle->tensors.emplace_back();
      else bundle->tensors.push_back(ops[op++].tensor);
    }
    (l.gradient ? arrived_grads_ : arrived_)[l.key] = bundle;
  }
}

void Executor::clear() {
  work_.clear();
  arrived_.clear();
  arrived_grads_.clear();
  outgoing_.clear();
  outgoing_grads_.clear();
}

std::vector<double> Executor::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets,
                                  double loss_scale, Trace* trace) {
  BRIGADE_CHECK(!forward_only_, "pipeline executor: schedule '", schedule_.name,
                "' runs no backward, so it cannot train a step; evaluate with run_forward");
  loss_scale_ = loss_scale;
  with_loss_ = true;
  keep_ = nullptr;
  walk(inputs, targets, trace);
  if (losses_.empty()) return {};
  std::vector<double> losses = ops::concat(losses_, 0).to_vector();  // one copy to the host
  losses_.clear();
  return losses;
}

std::vector<Tensor> Executor::run_forward(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets,
                                          const std::function<Tensor(const Tensor&)>& keep, Trace* trace) {
  BRIGADE_CHECK(forward_only_, "pipeline executor: schedule '", schedule_.name,
                "' runs backwards; a forward-only pass needs forward_only_schedule()");
  with_loss_ = !targets.empty();
  keep_ = keep;
  walk(inputs, targets, trace);
  keep_ = nullptr;
  return std::move(losses_);
}

void Executor::walk(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets, Trace* trace) {
  const std::vector<Action>& actions = schedule_.actions[size_t(rank_)];
  inputs_ = &inputs;
  targets_ = &targets;
  const bool holds_last = schedule_.layout.rank_of(schedule_.stages() - 1) == rank_;
  losses_.assign(holds_last ? size_t(schedule_.microbatches) : 0, Tensor());
  peak_stashed_ = 0;
  clear();
  ActionTimer timer(comm_.device(), trace != nullptr);

  try {
    for (const ExchangeStep& step : exchange_steps(actions)) {
      if (step.exchange) {
        std::vector<Action> messages(actions.begin() + long(step.first), actions.begin() + long(step.first + step.count));
        const size_t mark = timer.start();
        exchange(messages);
        timer.stop(mark, rank_, messages);  // one event per message, all with the exchange's span
        continue;
      }
      const Action& a = actions[step.first];
      const size_t mark = timer.start();
      switch (a.kind) {
        case ActionKind::forward: forward(a); break;
        case ActionKind::backward:
        case ActionKind::backward_input: backward(a); break;
        case ActionKind::backward_weight: backward_weight(a); break;
        default: fail("pipeline executor: unexpected action ", describe(a, rank_, schedule_.layout));
      }
      timer.stop(mark, rank_, {a});
      if (on_weights_final_ && last_weight_action_[size_t(a.chunk)] == step.first) on_weights_final_(a.chunk);
    }
    if (on_weights_final_)
      for (int c : weights_final_order())
        if (last_weight_action_[size_t(c)] == kNever) on_weights_final_(c);
    BRIGADE_CHECK(work_.empty(), "pipeline executor: rank ", rank_, " finished schedule '", schedule_.name, "' with ",
                  work_.size(), " micro-batch(es) whose backward never ran");
  } catch (...) {
    clear();
    losses_.clear();
    throw;
  }
  if (trace != nullptr) timer.emit(*trace);
  inputs_ = targets_ = nullptr;
}

}  // namespace brigade::pipeline
