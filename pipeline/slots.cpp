// unit_slots (see slots.h): the ranks are walked as the simulator walks them — each as far as its
// inputs allow, then the next — so an order that cannot finish is found, not looped on.
#include "pipeline/slots.h"

#include <map>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace brigade::pipeline {

namespace {

// When the computed pieces of work end, by (global stage, micro-batch).
struct Done {
  std::map<std::pair<int, int>, int> forward, input_grad;
};

// The time at which `a` (on `rank`) has its inputs, or -1 when one is not computed yet. `what` says
// which input, for the error.
int inputs_ready(const Action& a, int rank, const Layout& layout, const Done& done, std::string& what) {
  const int s = layout.stage(rank, a.chunk), m = a.microbatch;
  auto slot_of = [&](const std::map<std::pair<int, int>, int>& table, int stage, const char* name) {
    auto it = table.find({stage, m});
    if (it != table.end()) return it->second;
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

std::vector<std::vector<Slot>> unit_slots(const Schedule& s) {
  const int P = s.ranks();
  BRIGADE_CHECK(int(s.actions.size()) == P, "unit_slots: schedule '", s.name, "' has action lists for ",
                s.actions.size(), " ranks, but its layout has P=", P);
  std::vector<std::vector<Slot>> slots(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) slots[size_t(r)].assign(s.actions[size_t(r)].size(), Slot{});
  std::vector<size_t> next(size_t(P), 0);
  std::vector<int> free_at(size_t(P), 0);  // when the rank's last step ends
  Done done;
  std::vector<std::string> waits(static_cast<size_t>(P));  // what the stuck action waits for
  std::vector<size_t> blocked(static_cast<size_t>(P), 0);   // which action of the step that is
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < P; ++r) {
      const auto& list = s.actions[size_t(r)];
      for (size_t& i = next[size_t(r)]; i < list.size();) {
        // One step: an action, or an overlapped pair (an F and the backward after it), whose halves
        // share one slot — both take their inputs before it and hand their outputs on after it.
        const size_t count = list[i].overlapped ? 2 : 1;
        BRIGADE_CHECK(count == 1 || (i + 1 < list.size() && (list[i + 1].kind == ActionKind::backward ||
                                                             list[i + 1].kind == ActionKind::backward_input)),
                      "unit_slots: schedule '", s.name, "' rank ", r, ", step ", i, ": ", describe(list[i], r, s.layout),
                      " is overlapped, but no B or I follows it to pair with");
        int slot = free_at[size_t(r)], units = 0;
        for (size_t k = i; k < i + count; ++k) {
          const Action& a = list[k];
          BRIGADE_CHECK(a.chunk >= 0 && a.chunk < s.chunks() && a.microbatch >= 0 && a.microbatch < s.microbatches,
                        "unit_slots: schedule '", s.name, "' rank ", r, ", step ", k, ": ", describe(a, r, s.layout),
                        " is outside the schedule (M=", s.microbatches, ", V=", s.chunks(), ")");
          if (slot < 0) break;
          const int ready = inputs_ready(a, r, s.layout, done, waits[size_t(r)]);
          blocked[size_t(r)] = k;
          slot = ready < 0 ? -1 : std::max(slot, ready);
          units += a.kind == ActionKind::backward ? 2 : 1;
        }
        if (slot < 0) break;
        const Slot step{slot, slot + units};
        for (size_t k = i; k < i + count; ++k) {
          const Action& a = list[k];
          slots[size_t(r)][k] = step;
          const std::pair<int, int> key{s.layout.stage(r, a.chunk), a.microbatch};
          if (a.kind == ActionKind::forward) done.forward[key] = step.end;
          if (a.kind == ActionKind::backward || a.kind == ActionKind::backward_input) done.input_grad[key] = step.end;
        }
        free_at[size_t(r)] = step.end;
        i += count;
        moved = true;
      }
    }
  }
  std::vector<StuckOrder::Wait> stuck;
  std::ostringstream why;
  for (int r = 0; r < P; ++r) {
    if (next[size_t(r)] == s.actions[size_t(r)].size()) continue;
    const size_t i = blocked[size_t(r)];
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
