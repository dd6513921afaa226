#include "pipeline/schedule.h"

#include <utility>

#include "core/error.h"

namespace brigade::pipeline {

bool Schedule::split_backward() const {
  for (const auto& rank : actions) {
    for (const Action& a : rank) {
      if (a.kind == ActionKind::backward_input || a.kind == ActionKind::backward_weight) return true;
    }
  }
  return false;
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::naive: return "naive";
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zb_h1: return "zb-h1";
  }
  return "?";
}

const std::vector<ScheduleKind>& all_schedule_kinds() {
  static const std::vector<ScheduleKind> kinds = {ScheduleKind::naive, ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                                  ScheduleKind::interleaved, ScheduleKind::zb_h1};
  return kinds;
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : all_schedule_kinds()) {
    if (name == schedule_name(k)) return k;
  }
  fail("pipeline schedule: unknown schedule '", name, "' (expected naive, gpipe, 1f1b, interleaved or zb-h1)");
}

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int chunks) {
  const char* name = schedule_name(kind);
  BRIGADE_CHECK(chunks >= 1, "pipeline schedule ", name, ": needs at least one chunk per rank, got P=", ranks,
                ", M=", microbatches, ", V=", chunks);
  if (kind != ScheduleKind::interleaved) {
    BRIGADE_CHECK(chunks == 1, "pipeline schedule ", name, ": holds one chunk per rank, got V=", chunks, " (P=", ranks,
                  ", M=", microbatches, "); interleaved is the schedule for V > 1");
  }
  switch (kind) {
    case ScheduleKind::naive: return add_communication(naive_order(ranks, microbatches));
    case ScheduleKind::gpipe: return add_communication(gpipe_order(ranks, microbatches));
    case ScheduleKind::one_f_one_b: return add_communication(one_f_one_b_order(ranks, microbatches));
    case ScheduleKind::interleaved: return add_communication(interleaved_order(ranks, microbatches, chunks));
    case ScheduleKind::zb_h1: return add_communication(zb_h1_order(ranks, microbatches));
  }
  fail("pipeline schedule: unknown kind");
}

Schedule add_communication(Schedule schedule) {
  const Layout& layout = schedule.layout;
  for (int r = 0; r < int(schedule.actions.size()); ++r) {
    std::vector<Action> with_messages;
    with_messages.reserve(schedule.actions[r].size() * 3);
    for (size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const Action a = schedule.actions[r][i];
      BRIGADE_CHECK(is_compute(a.kind), "add_communication: schedule '", schedule.name, "' already has messages (rank ",
                    r, ", step ", i, ": ", describe(a, r, layout), ")");
      const int s = layout.stage(r, a.chunk);
      // With P = 1 every stage is on this rank, and neighbours hand tensors over in memory.
      const bool prev_remote = s > 0 && layout.rank_of(s - 1) != r;
      const bool next_remote = s + 1 < layout.stages() && layout.rank_of(s + 1) != r;
      switch (a.kind) {
        case ActionKind::forward:
          if (prev_remote) with_messages.push_back({ActionKind::recv_activation, a.microbatch, a.chunk});
          with_messages.push_back(a);
          if (next_remote) with_messages.push_back({ActionKind::send_activation, a.microbatch, a.chunk});
          break;
        case ActionKind::backward:
        case ActionKind::backward_input:
          if (next_remote) with_messages.push_back({ActionKind::recv_gradient, a.microbatch, a.chunk});
          with_messages.push_back(a);
          if (prev_remote) with_messages.push_back({ActionKind::send_gradient, a.microbatch, a.chunk});
          break;
        default:  // W: local work on what I left behind
          with_messages.push_back(a);
          break;
      }
    }
    schedule.actions[r] = std::move(with_messages);
  }
  return schedule;
}

}  // namespace brigade::pipeline
