// unit_slots (see slots.h): the ranks are walked as the simulator walks them — each as far as its
// inputs allow, then the next — so an order that cannot finish is found, not looped on.
#include "pipeline/slots.h"

#include <map>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace brigade::pipeline {

namespace {

// Slots of the computed pieces of work, by (global stage, micro-batch).
struct Done {
  std::map<std::pair<int, int>, int> forward, input_grad;
};

// The slot at which `a` (on `rank`) has its inputs, or -1 when one is not computed yet. `what` says
// which input, for the error.
int inputs_ready(const Action& a, int rank, const Layout& layout, const Done& done, std::string& what) {
  const int s = layout.stage(rank, a.chunk), m = a.microbatch;
  auto slot_of = [&](const std::map<std::pair<int, int>, int>& table, int stage, const char* name) {
    auto it = table.find({stage, m});
    if (it != table.end()) return it->second + 1;
    std::ostringstream os;
    os << name << " of micro-batch " << m << " on stage " << stage << " (rank " << layout.rank_of(stage) << ")";
    what = os.str();
    return -1;
  };
  switch (a.kind) {
    case ActionKind::forward: return s == 0 ? 0 : slot_of(done.forward, s - 1, "F");
    case ActionKind::backward:
    case ActionKind::backward_input:
      return s == layout.stages() - 1 ? slot_of(done.forward, s, "F") : slot_of(done.input_grad, s + 1, "B or I");
    case ActionKind::backward_weight: return slot_of(done.input_grad, s, "I");
    default: break;
  }
  fail("unit_slots: ", describe(a, rank, layout), " is a message; slots are for compute-only schedules");
}

}  // namespace

std::vector<std::vector<int>> unit_slots(const Schedule& s) {
  const int P = s.ranks();
  BRIGADE_CHECK(int(s.actions.size()) == P, "unit_slots: schedule '", s.name, "' has action lists for ",
                s.actions.size(), " ranks, but its layout has P=", P);
  std::vector<std::vector<int>> slots(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) slots[size_t(r)].assign(s.actions[size_t(r)].size(), 0);
  std::vector<size_t> next(size_t(P), 0);
  std::vector<int> free_at(size_t(P), 0);  // the first slot after the rank's last action
  Done done;
  std::vector<std::string> waits(static_cast<size_t>(P));
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < P; ++r) {
      const auto& list = s.actions[size_t(r)];
      for (size_t& i = next[size_t(r)]; i < list.size(); ++i) {
        const Action& a = list[i];
        BRIGADE_CHECK(a.chunk >= 0 && a.chunk < s.chunks() && a.microbatch >= 0 && a.microbatch < s.microbatches,
                      "unit_slots: schedule '", s.name, "' rank ", r, ", step ", i, ": ", describe(a, r, s.layout),
                      " is outside the schedule (M=", s.microbatches, ", V=", s.chunks(), ")");
        const int ready = inputs_ready(a, r, s.layout, done, waits[size_t(r)]);
        if (ready < 0) break;
        const int slot = std::max(ready, free_at[size_t(r)]);
        slots[size_t(r)][i] = slot;
        free_at[size_t(r)] = slot + 1;
        const std::pair<int, int> key{s.layout.stage(r, a.chunk), a.microbatch};
        if (a.kind == ActionKind::forward) done.forward[key] = slot;
        if (a.kind == ActionKind::backward || a.kind == ActionKind::backward_input) done.input_grad[key] = slot;
        moved = true;
      }
    }
  }
  std::vector<StuckOrder::Wait> stuck;
  std::ostringstream why;
  for (int r = 0; r < P; ++r) {
    const size_t i = next[size_t(r)];
    if (i == s.actions[size_t(r)].size()) continue;
    stuck.push_back({r, i, waits[size_t(r)]});
    why << "\n  rank " << r << ", step " << i << ": " << describe(s.actions[size_t(r)][i], r, s.layout)
        << " waits for " << waits[size_t(r)];
  }
  if (stuck.empty()) return slots;
  std::ostringstream what;
  what << "schedule '" << s.name << "' (P=" << P << ", M=" << s.microbatches << ", V=" << s.chunks()
       << ") can never finish: every rank left waits for an input that is computed only later in some rank's "
          "list, or never"
       << why.str();
  throw StuckOrder(what.str(), std::move(stuck));
}

}  // namespace brigade::pipeline
