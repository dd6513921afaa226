#include "pipeline/analysis/memory.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/error.h"

namespace brigade::pipeline {

namespace {

void check(const Schedule& schedule, const MemoryModel& model) {
  const int S = schedule.stages(), P = schedule.ranks();
  BRIGADE_CHECK(int(model.stages.size()) == S, "predict_memory: ", model.stages.size(),
                " stages' sizes given, but schedule '", schedule.name, "' has ", S, " stages (P*V)");
  BRIGADE_CHECK(model.resident.empty() || int(model.resident.size()) == P, "predict_memory: ", model.resident.size(),
                " ranks' resident sizes given, but schedule '", schedule.name, "' has P=", P);
  for (size_t s = 0; s < model.stages.size(); ++s) {
    const StageMemory& m = model.stages[s];
    for (int64_t v : {m.parameters, m.gradients, m.optimizer, m.activations, m.deferred, m.gradient_in,
                      m.activation_in, m.gradient_out, m.workspace}) {
      BRIGADE_CHECK(v >= 0, "predict_memory: stage ", s, "'s sizes must be non-negative, got parameters ",
                    m.parameters, ", gradients ", m.gradients, ", optimizer ", m.optimizer, ", activations ",
                    m.activations, ", deferred ", m.deferred, ", gradient_in ", m.gradient_in,
                    ", activation_in ", m.activation_in, ", gradient_out ", m.gradient_out, ", workspace ",
                    m.workspace);
    }
  }
  for (size_t r = 0; r < model.resident.size(); ++r)
    BRIGADE_CHECK(model.resident[r] >= 0, "predict_memory: rank ", r, "'s resident size is negative: ",
                  model.resident[r]);
  BRIGADE_CHECK(model.communication >= 0, "predict_memory: communication buffers of ", model.communication,
                " bytes (must be non-negative)");
}

}  // namespace

std::vector<RankMemory> predict_memory(const Schedule& schedule, const MemoryModel& model,
                                       const SimulationResult* timing) {
  check(schedule, model);
  const Layout& layout = schedule.layout;
  // When each (receiving stage, micro-batch)'s gradient message was taken: the end of its RECV.
  std::map<std::pair<int, int>, double> taken_at;
  if (timing != nullptr) {
    BRIGADE_CHECK(int(timing->timeline.size()) == schedule.ranks(), "predict_memory: the timing has ",
                  timing->timeline.size(), " ranks, but schedule '", schedule.name, "' has P=", schedule.ranks());
    for (int q = 0; q < schedule.ranks(); ++q) {
      BRIGADE_CHECK(timing->timeline[size_t(q)].size() == schedule.actions[size_t(q)].size(), "predict_memory: rank ",
                    q, "'s timing has ", timing->timeline[size_t(q)].size(), " actions, its list ",
                    schedule.actions[size_t(q)].size(), ": simulate this schedule");
      for (const TimedAction& t : timing->timeline[size_t(q)])
        if (t.action.kind == ActionKind::recv_gradient)
          taken_at[{layout.stage(q, t.action.chunk), t.action.microbatch}] = t.end;
    }
  }
  std::vector<RankMemory> out(size_t(schedule.ranks()));
  for (int r = 0; r < schedule.ranks(); ++r) {
    RankMemory& m = out[size_t(r)];
    m.states = model.communication + (model.resident.empty() ? 0 : model.resident[size_t(r)]);
    for (int c = 0; c < layout.chunks; ++c) {
      const StageMemory& s = model.stages[size_t(layout.stage(r, c))];
      m.states += s.parameters + s.optimizer;
    }
    std::vector<bool> has_gradients(size_t(layout.chunks), false);
    int64_t stash = 0, gradients = 0;  // now
    m.peak = m.states;
    const std::vector<Action>& actions = schedule.actions[size_t(r)];
    std::map<std::pair<int, int>, int64_t> received;  // (chunk, micro-batch): message buffers held
    std::vector<std::pair<double, int64_t>> sent;       // gradients sent, held until this time
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const int stage = layout.stage(r, a.chunk);
      const StageMemory& s = model.stages[size_t(stage)];
      if (timing != nullptr && is_compute(a.kind)) {  // what the receivers have taken by now
        const double now = timing->timeline[size_t(r)][i].start;
        for (auto it = sent.begin(); it != sent.end();) {
          if (it->first <= now) {
            stash -= it->second;
            it = sent.erase(it);
          } else {
            ++it;
          }
        }
      }
      if (a.kind == ActionKind::recv_gradient || a.kind == ActionKind::recv_activation) {
        const int64_t bytes = a.kind == ActionKind::recv_gradient ? s.gradient_in : s.activation_in;
        received[{a.chunk, a.microbatch}] += bytes;
        stash += bytes;
        continue;  // the peak is checked during the compute actions, which hold at least as much
      }
      if (!is_compute(a.kind)) continue;
      const bool makes_gradients = (a.kind == ActionKind::backward || a.kind == ActionKind::backward_weight) &&
                                   !has_gradients[size_t(a.chunk)];
      if (makes_gradients) {
        has_gradients[size_t(a.chunk)] = true;
        gradients += s.gradients;
      }
      // During the action: what it keeps (a new stash, new gradients) and its workspace, with the
      // stash it frees still there — a backward reads it to the end.
      const int64_t kept = a.kind == ActionKind::forward          ? s.activations
                           : a.kind == ActionKind::backward_input ? s.deferred
                                                                  : 0;
      const int64_t during = m.states + gradients + stash + kept + s.workspace;
      if (during > m.peak) {
        m.peak = during;
        m.peak_step = int(i);
        m.activations = stash + kept;
        m.gradients = gradients;
        m.workspace = s.workspace;
      }
      stash += kept;
      if (a.kind == ActionKind::backward) stash -= s.activations;
      if (a.kind == ActionKind::backward_weight) stash -= s.activations + s.deferred;
      const bool sends_gradient = (a.kind == ActionKind::backward || a.kind == ActionKind::backward_input) &&
                                  stage > 0 && layout.rank_of(stage - 1) != r;
      if (timing != nullptr && sends_gradient && s.gradient_out > 0) {
        sent.push_back({taken_at.at({stage - 1, a.microbatch}), s.gradient_out});
        stash += s.gradient_out;
      }
      if (a.kind == ActionKind::backward || a.kind == ActionKind::backward_weight) {
        const auto it = received.find({a.chunk, a.microbatch});
        if (it != received.end()) {
          stash -= it->second;
          received.erase(it);
        }
      }
    }
  }
  return out;
}

}  // namespace brigade::pipeline
