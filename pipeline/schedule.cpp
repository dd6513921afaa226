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
    case ScheduleKind::interleaved: {
      // With M = P there is no steady state worth combining (and pairing the last warm-up F with
      // the first B would make two ranks wait for each other); the messages stay next to their
      // actions, which check_exchanges proves safe. See add_communication in schedule.h.
      const MessagePlacement placement =
          microbatches >= 2 * ranks ? MessagePlacement::per_iteration : MessagePlacement::next_to_actions;
      return add_communication(interleaved_order(ranks, microbatches, chunks), placement);
    }
    case ScheduleKind::zb_h1: return add_communication(zb_h1_order(ranks, microbatches));
  }
  fail("pipeline schedule: unknown kind");
}

namespace {

// The messages one compute action implies: the RECVs of what it needs and the SENDs of what it makes.
void messages_of(const Action& a, int rank, const Layout& layout, std::vector<Action>& recvs,
                 std::vector<Action>& sends) {
  const int s = layout.stage(rank, a.chunk);
  // With P = 1 every stage is on this rank, and neighbours hand tensors over in memory.
  const bool prev_remote = s > 0 && layout.rank_of(s - 1) != rank;
  const bool next_remote = s + 1 < layout.stages() && layout.rank_of(s + 1) != rank;
  switch (a.kind) {
    case ActionKind::forward:
      if (prev_remote) recvs.push_back({ActionKind::recv_activation, a.microbatch, a.chunk});
      if (next_remote) sends.push_back({ActionKind::send_activation, a.microbatch, a.chunk});
      break;
    case ActionKind::backward:
    case ActionKind::backward_input:
      if (next_remote) recvs.push_back({ActionKind::recv_gradient, a.microbatch, a.chunk});
      if (prev_remote) sends.push_back({ActionKind::send_gradient, a.microbatch, a.chunk});
      break;
    default:  // W: local work on what I left behind
      break;
  }
}

// One past the last action of the iteration starting at `first`.
size_t iteration_end(const std::vector<Action>& compute, size_t first, MessagePlacement placement) {
  const bool pair = placement == MessagePlacement::per_iteration && compute[first].kind == ActionKind::forward &&
                    first + 1 < compute.size() &&
                    (compute[first + 1].kind == ActionKind::backward ||
                     compute[first + 1].kind == ActionKind::backward_input);
  return first + (pair ? 2 : 1);
}

}  // namespace

// Both placements are one walk: split the list into iterations; before each, one run of messages —
// the SENDs of the previous iteration, then the RECVs of this one. With one action per iteration
// that is "SEND right after, RECV right before".
Schedule add_communication(Schedule schedule, MessagePlacement placement) {
  const Layout& layout = schedule.layout;
  for (int r = 0; r < int(schedule.actions.size()); ++r) {
    const std::vector<Action>& compute = schedule.actions[size_t(r)];
    for (size_t i = 0; i < compute.size(); ++i) {
      BRIGADE_CHECK(is_compute(compute[i].kind), "add_communication: schedule '", schedule.name,
                    "' already has messages (rank ", r, ", step ", i, ": ", describe(compute[i], r, layout), ")");
    }
    std::vector<Action> with_messages;
    with_messages.reserve(compute.size() * 3);
    std::vector<Action> sends;  // of the previous iteration, not yet placed
    for (size_t first = 0; first < compute.size();) {
      const size_t end = iteration_end(compute, first, placement);
      std::vector<Action> recvs, next_sends;
      for (size_t i = first; i < end; ++i) messages_of(compute[i], r, layout, recvs, next_sends);
      with_messages.insert(with_messages.end(), sends.begin(), sends.end());
      with_messages.insert(with_messages.end(), recvs.begin(), recvs.end());
      with_messages.insert(with_messages.end(), compute.begin() + std::ptrdiff_t(first),
                           compute.begin() + std::ptrdiff_t(end));
      sends = std::move(next_sends);
      first = end;
    }
    with_messages.insert(with_messages.end(), sends.begin(), sends.end());
    schedule.actions[size_t(r)] = std::move(with_messages);
  }
  return schedule;
}

}  // namespace brigade::pipeline
