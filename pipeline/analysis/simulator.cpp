#include "pipeline/analysis/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <sstream>
#include <tuple>

#include "pipeline/analysis/grid.h"

namespace brigade::pipeline {

namespace {

// What has happened to one micro-batch on one stage so far.
struct Progress {
  bool forward = false;
  bool input_grad = false;   // B or I has run
  bool weight_grad = false;  // B or W has run
  bool split = false;        // the backward ran as I + W
  bool activation_in = false;
  bool gradient_in = false;
  bool activation_sent = false;
  bool gradient_sent = false;
};

struct Message {
  int microbatch;
  int from_stage;
  double arrival;
  int send_step;  // the SEND in the sender's list, to mark it when the wrong RECV meets it
};

enum class Channel { activation, gradient };

class Simulator {
 public:
  Simulator(const Schedule& schedule, const Costs& costs, int64_t activation_bytes)
      : s_(schedule),
        layout_(schedule.layout),
        costs_(costs),
        activation_bytes_(activation_bytes),
        forward_only_(schedule.forward_only()) {}

  SimulationResult run();

 private:
  // Runs rank r's next action; false when it is a RECV whose message has not been sent yet.
  bool step(int r);
  // Action `a`, step i of rank r, on global `stage`, with the state `p` of its (stage, micro-batch).
  void run_compute(int r, int i, const Action& a, Progress& p, int stage);
  void run_send(int r, int i, const Action& a, Progress& p, int stage);
  bool run_recv(int r, int i, const Action& a, Progress& p);
  void stash(int r, int stage, int delta);
  void wake(int r) {
    if (!is_awake_[size_t(r)]) awake_.push_back(r);
    is_awake_[size_t(r)] = true;
  }

  [[noreturn]] void diagnose_deadlock() const;
  void check_complete() const;
  // Throws the ScheduleError for action `step` of `rank`: the problem, then the marked grid.
  [[noreturn]] void fail_at(int rank, int step, const std::string& problem,
                            std::vector<GridMark> extra_marks = {}) const;
  template <class... Parts>
  [[noreturn]] void violation(int rank, int step, const Parts&... parts) const {
    std::ostringstream problem;
    (problem << ... << parts);
    fail_at(rank, step, problem.str());
  }

  Progress& progress(int stage, int microbatch) {
    return progress_[size_t(stage) * size_t(s_.microbatches) + size_t(microbatch)];
  }
  const Progress& progress(int stage, int microbatch) const {
    return progress_[size_t(stage) * size_t(s_.microbatches) + size_t(microbatch)];
  }
  std::deque<Message>& queue(int from, int to, Channel c) { return queues_[{from, to, int(c)}]; }
  std::string what(int r, const Action& a) const { return describe(a, r, layout_); }
  std::string stage_name(int stage) const;

  const Schedule& s_;
  const Layout layout_;
  const Costs costs_;
  const int64_t activation_bytes_;
  const bool forward_only_;  // no rank runs a backward: F stashes nothing, and only F is required

  std::vector<Progress> progress_;
  std::map<std::tuple<int, int, int>, std::deque<Message>> queues_;  // (from rank, to rank, channel)
  std::vector<size_t> next_;                                         // per rank: index of the next action
  std::vector<int> awake_;                                           // ranks that may be able to move
  std::vector<bool> is_awake_;
  std::vector<double> clock_;
  std::vector<int> stashed_;  // per stage, now
  std::vector<int> stashed_on_rank_;
  SimulationResult result_;
};

std::string Simulator::stage_name(int stage) const {
  std::ostringstream os;
  os << "stage " << stage << " (rank " << layout_.rank_of(stage);
  if (layout_.chunks > 1) os << ", chunk " << layout_.chunk_of(stage);
  os << ")";
  return os.str();
}

SimulationResult Simulator::run() {
  const int P = layout_.ranks;
  BRIGADE_CHECK(P >= 1 && layout_.chunks >= 1 && s_.microbatches >= 1, "simulate: schedule '", s_.name,
                "' needs at least one rank, chunk and micro-batch, got P=", P, ", V=", layout_.chunks,
                ", M=", s_.microbatches);
  BRIGADE_CHECK(int(s_.actions.size()) == P, "simulate: schedule '", s_.name, "' has action lists for ",
                s_.actions.size(), " ranks, but its layout has P=", P);
  costs_.check(layout_.stages());
  BRIGADE_CHECK(activation_bytes_ >= 0, "simulate: activation size must be non-negative, got ", activation_bytes_);

  const int S = layout_.stages();
  progress_.assign(size_t(S) * size_t(s_.microbatches), Progress{});
  next_.assign(size_t(P), 0);
  is_awake_.assign(size_t(P), false);
  clock_.assign(size_t(P), 0.0);
  stashed_.assign(size_t(S), 0);
  stashed_on_rank_.assign(size_t(P), 0);
  result_.timeline.assign(size_t(P), {});
  result_.busy.assign(size_t(P), 0.0);
  result_.peak_activations.assign(size_t(S), 0);
  result_.peak_activations_per_rank.assign(size_t(P), 0);

  // Ranks only wait for messages, and a message's arrival time does not depend on when the receiver
  // looks for it, so running one rank as far as it can go, then another, gives the same times as an
  // event loop ordered by the clock. A rank stuck at a RECV sleeps until a SEND to it wakes it; when
  // no rank is awake but some have actions left, they wait for each other: a deadlock.
  for (int r = P - 1; r >= 0; --r) wake(r);
  while (!awake_.empty()) {
    const int r = awake_.back();
    awake_.pop_back();
    is_awake_[size_t(r)] = false;
    while (next_[size_t(r)] < s_.actions[size_t(r)].size() && step(r)) ++next_[size_t(r)];
  }
  for (int r = 0; r < P; ++r) {
    if (next_[size_t(r)] < s_.actions[size_t(r)].size()) diagnose_deadlock();
  }
  check_complete();

  double busy = 0;
  for (int r = 0; r < P; ++r) {
    result_.makespan = std::max(result_.makespan, clock_[size_t(r)]);
    busy += result_.busy[size_t(r)];
  }
  const double capacity = double(P) * result_.makespan;
  result_.bubble_fraction = capacity > 0 ? 1.0 - busy / capacity : 0.0;
  result_.bubble_ratio = busy > 0 ? (capacity - busy) / busy : 0.0;
  result_.bytes = result_.messages() * activation_bytes_;
  return std::move(result_);
}

bool Simulator::step(int r) {
  const int i = int(next_[size_t(r)]);
  const Action& a = s_.actions[size_t(r)][size_t(i)];
  if (a.chunk < 0 || a.chunk >= layout_.chunks)
    violation(r, i, "chunk ", a.chunk, " does not exist (V=", layout_.chunks, ")");
  if (a.microbatch < 0 || a.microbatch >= s_.microbatches) {
    violation(r, i, "micro-batch ", a.microbatch, " does not exist (M=", s_.microbatches, ")");
  }
  const int stage = layout_.stage(r, a.chunk);
  Progress& p = progress(stage, a.microbatch);
  if (is_compute(a.kind)) {
    run_compute(r, i, a, p, stage);
    return true;
  }
  if (is_send(a.kind)) {
    run_send(r, i, a, p, stage);
    return true;
  }
  return run_recv(r, i, a, p);
}

void Simulator::stash(int r, int stage, int delta) {
  stashed_[size_t(stage)] += delta;
  stashed_on_rank_[size_t(r)] += delta;
  int& stage_peak = result_.peak_activations[size_t(stage)];
  int& rank_peak = result_.peak_activations_per_rank[size_t(r)];
  stage_peak = std::max(stage_peak, stashed_[size_t(stage)]);
  rank_peak = std::max(rank_peak, stashed_on_rank_[size_t(r)]);
}

void Simulator::run_compute(int r, int i, const Action& a, Progress& p, int stage) {
  const int m = a.microbatch;
  double cost = 0;
  switch (a.kind) {
    case ActionKind::forward: {
      if (p.forward) violation(r, i, "runs a second time: micro-batch ", m, " was already forwarded on this stage");
      if (a.overlapped) {
        const auto& list = s_.actions[size_t(r)];
        const bool paired = size_t(i) + 1 < list.size() && (list[size_t(i) + 1].kind == ActionKind::backward ||
                                                            list[size_t(i) + 1].kind == ActionKind::backward_input);
        if (!paired) violation(r, i, "is overlapped, but the next action is not the B or I it pairs with");
      }
      const int prev = stage - 1;
      if (prev >= 0 && layout_.rank_of(prev) == r && !progress(prev, m).forward) {
        violation(r, i, "needs the output of F on ", stage_name(prev), ", which has not run yet on this rank");
      }
      if (prev >= 0 && layout_.rank_of(prev) != r && !p.activation_in) {
        violation(r, i, "needs the activation of micro-batch ", m, " from ", stage_name(prev),
                  ", but no RECV before it received it");
      }
      p.forward = true;
      if (!forward_only_) stash(r, stage, +1);  // an evaluation pass keeps nothing for a backward
      cost = costs_.of(stage).forward;
      break;
    }
    case ActionKind::backward:
    case ActionKind::backward_input: {
      const char* name = a.kind == ActionKind::backward ? "B" : "I";
      if (!p.forward) violation(r, i, name, " before its F: micro-batch ", m, " has not been forwarded on this stage");
      if (p.input_grad) violation(r, i, "runs a second time: the backward of micro-batch ", m, " already ran here");
      const int next = stage + 1;  // the last stage starts from the loss: its own F is all it needs
      if (next < layout_.stages() && layout_.rank_of(next) == r && !progress(next, m).input_grad) {
        violation(r, i, "needs the input gradient from ", stage_name(next), ", whose backward has not run yet");
      }
      if (next < layout_.stages() && layout_.rank_of(next) != r && !p.gradient_in) {
        violation(r, i, "needs the gradient of micro-batch ", m, " from ", stage_name(next),
                  ", but no RECV before it received it");
      }
      p.input_grad = true;
      if (a.kind == ActionKind::backward) {
        p.weight_grad = true;
        stash(r, stage, -1);
        cost = costs_.full_backward(stage);
      } else {
        p.split = true;  // the stash stays: W reads the layer inputs again
        cost = costs_.of(stage).backward;
      }
      break;
    }
    case ActionKind::backward_weight:
      if (!p.input_grad) violation(r, i, "W before its I: the input-gradient half has not run on this stage");
      if (!p.split) violation(r, i, "W after a full B: B already computed the weight gradients");
      if (p.weight_grad) violation(r, i, "runs a second time: the weight gradient of micro-batch ", m, " is done");
      p.weight_grad = true;
      stash(r, stage, -1);
      cost = costs_.of(stage).weight;
      break;
    default: break;
  }
  double& clock = clock_[size_t(r)];
  result_.timeline[size_t(r)].push_back({a, clock, clock + cost});
  clock += cost;
  result_.busy[size_t(r)] += cost;
}

void Simulator::run_send(int r, int i, const Action& a, Progress& p, int stage) {
  const bool activation = a.kind == ActionKind::send_activation;
  const int to_stage = layout_.peer_stage(a, r);
  if (to_stage < 0) violation(r, i, "there is no ", activation ? "next" : "previous", " stage to send to");
  const int to = layout_.rank_of(to_stage);
  if (to == r) violation(r, i, "sends to its own rank: stages on one rank hand tensors over without messages");
  if (activation) {
    if (!p.forward) violation(r, i, "sends an activation that is not computed yet: F has not run");
    if (p.activation_sent) violation(r, i, "sends the same activation twice");
    p.activation_sent = true;
    ++result_.activation_messages;
  } else {
    if (!p.input_grad) violation(r, i, "sends a gradient that is not computed yet: B/I has not run");
    if (p.gradient_sent) violation(r, i, "sends the same gradient twice");
    p.gradient_sent = true;
    ++result_.gradient_messages;
  }
  const double now = clock_[size_t(r)];
  queue(r, to, activation ? Channel::activation : Channel::gradient)
      .push_back({a.microbatch, stage, now + costs_.communication, i});
  wake(to);  // in case it waits for this message
  result_.timeline[size_t(r)].push_back({a, now, now});
}

bool Simulator::run_recv(int r, int i, const Action& a, Progress& p) {
  const bool activation = a.kind == ActionKind::recv_activation;
  const int from_stage = layout_.peer_stage(a, r);
  if (from_stage < 0) violation(r, i, "there is no ", activation ? "previous" : "next", " stage to receive from");
  const int from = layout_.rank_of(from_stage);
  if (from == r) violation(r, i, "receives from its own rank: stages on one rank hand tensors over without messages");
  auto& q = queue(from, r, activation ? Channel::activation : Channel::gradient);
  if (q.empty()) return false;  // not sent yet: wait
  const Message msg = q.front();
  if (msg.microbatch != a.microbatch || msg.from_stage != from_stage) {
    std::ostringstream why;
    why << "message mismatch: expects the " << (activation ? "activation" : "gradient") << " of micro-batch "
        << a.microbatch << " from stage " << from_stage << ", but the next one rank " << from << " sent is micro-batch "
        << msg.microbatch << " from stage " << msg.from_stage
        << " (messages between two ranks arrive in the order they were sent)";
    fail_at(r, i, why.str(), {{from, msg.send_step, '!'}});
  }
  q.pop_front();
  (activation ? p.activation_in : p.gradient_in) = true;
  double& clock = clock_[size_t(r)];
  const double start = clock;
  clock = std::max(clock, msg.arrival);
  result_.timeline[size_t(r)].push_back({a, start, clock});
  return true;
}

// No rank can move, so every unfinished rank waits at a RECV for a message not sent yet.
void Simulator::diagnose_deadlock() const {
  const int P = layout_.ranks;
  // For each waiting rank: the rank it waits for, or -1 when that rank will never send the message.
  std::vector<int> waits_for(size_t(P), -2);  // -2: not waiting (finished)
  for (int r = 0; r < P; ++r) {
    const size_t i = next_[size_t(r)];
    if (i >= s_.actions[size_t(r)].size()) continue;
    const Action& a = s_.actions[size_t(r)][i];
    const int from_stage = layout_.peer_stage(a, r);
    const int from = layout_.rank_of(from_stage);
    const ActionKind send_kind =
        a.kind == ActionKind::recv_activation ? ActionKind::send_activation : ActionKind::send_gradient;
    const auto& theirs = s_.actions[size_t(from)];
    const auto it = std::find(theirs.begin() + std::ptrdiff_t(next_[size_t(from)]), theirs.end(),
                              Action{send_kind, a.microbatch, layout_.chunk_of(from_stage)});
    if (it == theirs.end()) {
      fail_at(r, int(i),
              "RECV without a matching SEND: rank " + std::to_string(from) +
                  " never sends this message (nothing left in its list sends it)");
    }
    waits_for[size_t(r)] = from;
  }
  // Everyone waits for someone who will send later but is waiting too: follow the arrows to a cycle.
  int start = 0;
  while (waits_for[size_t(start)] < 0) ++start;
  std::vector<int> seen_at(size_t(P), -1);
  std::vector<int> path;
  for (int r = start; seen_at[size_t(r)] < 0; r = waits_for[size_t(r)]) {
    seen_at[size_t(r)] = int(path.size());
    path.push_back(r);
  }
  const int cycle_start = seen_at[size_t(waits_for[size_t(path.back())])];
  std::ostringstream why;
  why << "deadlock: ";
  std::vector<GridMark> marks;
  for (size_t k = size_t(cycle_start); k < path.size(); ++k) {
    const int r = path[k];
    const size_t i = next_[size_t(r)];
    why << (k == size_t(cycle_start) ? "rank " : ", which waits for rank ") << r << " (step " << i << ": "
        << what(r, s_.actions[size_t(r)][i]) << ")";
    marks.push_back({r, int(i), '!'});
  }
  why << ", which waits for rank " << path[size_t(cycle_start)] << ": each waits for a message the next one "
      << "sends only later in its list";
  const int r0 = path[size_t(cycle_start)];
  fail_at(r0, int(next_[size_t(r0)]), why.str(), marks);
}

void Simulator::check_complete() const {
  const int S = layout_.stages();
  for (int stage = 0; stage < S; ++stage) {
    const int r = layout_.rank_of(stage);
    const int end = int(s_.actions[size_t(r)].size());
    for (int m = 0; m < s_.microbatches; ++m) {
      const Progress& p = progress(stage, m);
      const char* missing = !p.forward                       ? "F"
                            : forward_only_                    ? nullptr
                            : !p.input_grad                    ? "B (or I)"
                            : !p.weight_grad                   ? "W"
                                                               : nullptr;
      if (missing) {
        fail_at(r, end,
                stage_name(stage) + " never runs " + missing + " for micro-batch " + std::to_string(m) +
                    (forward_only_ ? ": a forward-only schedule runs F once per micro-batch on every stage"
                                   : ": every micro-batch needs F and B (or I and W) once on every stage"));
      }
    }
  }
  // No message can be left unreceived here: every message feeds an F, B or I that needs its RECV,
  // and all of those ran.
}

void Simulator::fail_at(int rank, int step, const std::string& problem, std::vector<GridMark> marks) const {
  std::ostringstream os;
  std::string action = "after its last action";
  if (step < int(s_.actions[size_t(rank)].size())) action = what(rank, s_.actions[size_t(rank)][size_t(step)]);
  os << "simulate: schedule '" << s_.name << "' (P=" << layout_.ranks << ", M=" << s_.microbatches
     << ", V=" << layout_.chunks << ") fails at rank " << rank << ", step " << step << ", " << action << ": " << problem
     << "\n\n";
  marks.push_back({rank, step, '!'});
  for (int r = 0; r < layout_.ranks; ++r) {
    const bool marked = std::any_of(marks.begin(), marks.end(), [&](const GridMark& m) { return m.rank == r; });
    if (!marked && next_[size_t(r)] < s_.actions[size_t(r)].size()) marks.push_back({r, int(next_[size_t(r)]), '*'});
  }
  os << action_grid(s_, marks)
     << "\n! marks the failing action; * the next action of each other rank (everything above it has run)\n";
  throw ScheduleError(os.str(), problem, rank, step);
}

}  // namespace

void Costs::check(int num_stages) const {
  for (double c : {forward, backward, weight, communication}) {
    BRIGADE_CHECK(std::isfinite(c) && c >= 0, "simulate: costs must be finite and non-negative, got F=", forward,
                  " B=", backward, " W=", weight, " communication=", communication);
  }
  if (stages.empty()) return;
  BRIGADE_CHECK(int64_t(stages.size()) == num_stages, "simulate: ", stages.size(),
                " per-stage costs given, but the schedule has ", num_stages, " stages (P*V): give one per stage");
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageCost& c = stages[s];
    for (double v : {c.forward, c.backward, c.weight}) {
      BRIGADE_CHECK(std::isfinite(v) && v >= 0, "simulate: the costs of stage ", s,
                    " must be finite and non-negative, got F=", c.forward, " I=", c.backward, " W=", c.weight);
    }
  }
}

SimulationResult simulate(const Schedule& schedule, const Costs& costs, int64_t activation_bytes) {
  return Simulator(schedule, costs, activation_bytes).run();
}

}  // namespace brigade::pipeline
