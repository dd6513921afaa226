#include "pipeline/schedule.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "pipeline/slots.h"

namespace brigade::pipeline {

bool Schedule::forward_only() const {
  for (const auto& rank : actions)
    for (const Action& a : rank)
      if (is_compute(a.kind) && a.kind != ActionKind::forward) return false;
  return true;
}

Schedule forward_only_schedule(const Layout& layout, int microbatches) {
  return add_communication(forward_only_order(layout, microbatches), MessagePlacement::lock_step);
}

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
    case ScheduleKind::zb_v: return "zb-v";
    case ScheduleKind::dualpipev: return "dualpipev";
  }
  return "?";
}

std::string schedule_names() {
  std::string out;
  const auto& kinds = all_schedule_kinds();
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) out += i + 1 == kinds.size() ? " or " : ", ";
    out += schedule_name(kinds[i]);
  }
  return out;
}

int default_chunks(ScheduleKind kind) {
  return kind == ScheduleKind::interleaved || kind == ScheduleKind::zb_v || kind == ScheduleKind::dualpipev ? 2 : 1;
}

Placement placement_of(ScheduleKind kind) {
  return kind == ScheduleKind::zb_v || kind == ScheduleKind::dualpipev ? Placement::v_shape : Placement::interleaved;
}

const std::vector<ScheduleKind>& all_schedule_kinds() {
  static const std::vector<ScheduleKind> kinds = {ScheduleKind::naive, ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                                  ScheduleKind::interleaved, ScheduleKind::zb_h1, ScheduleKind::zb_v,
                                                  ScheduleKind::dualpipev};
  return kinds;
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : all_schedule_kinds()) {
    if (name == schedule_name(k)) return k;
  }
  fail("pipeline schedule: unknown schedule '", name, "' (expected ", schedule_names(), ")");
}

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int chunks) {
  const char* name = schedule_name(kind);
  if (chunks == 0) chunks = default_chunks(kind);
  BRIGADE_CHECK(chunks >= 1, "pipeline schedule ", name, ": needs at least one chunk per rank, got P=", ranks,
                ", M=", microbatches, ", V=", chunks);
  if (placement_of(kind) == Placement::v_shape) {
    BRIGADE_CHECK(chunks == 2, "pipeline schedule ", name, ": holds exactly two chunks per rank (the two arms of its "
                  "V), got V=", chunks, " (P=", ranks, ", M=", microbatches, ")");
  } else if (kind != ScheduleKind::interleaved) {
    BRIGADE_CHECK(chunks == 1, "pipeline schedule ", name, ": holds one chunk per rank, got V=", chunks, " (P=", ranks,
                  ", M=", microbatches, "); interleaved, zb-v and dualpipev are the schedules for V > 1");
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
    case ScheduleKind::zb_v: return add_communication(zb_v_order(ranks, microbatches), MessagePlacement::lock_step);
    case ScheduleKind::dualpipev:
      return add_communication(dualpipev_order(ranks, microbatches), MessagePlacement::lock_step);
  }
  fail("pipeline schedule: unknown kind");
}

namespace {

// The messages one compute action implies: the RECVs of what it needs and the SENDs of what it makes.
void messages_of(const Action& a, int rank, const Layout& layout, std::vector<Action>& recvs,
                 std::vector<Action>& sends) {
  const int s = layout.stage(rank, a.chunk);
  // Neighbours on this rank (every stage when P = 1; stages P-1 and P in a V) hand tensors over in
  // memory.
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

// lock_step: each rank's actions and messages ordered by time on the unit clock (pipeline/slots.h).
// A compute action stands at its start; a message at the end of the step that made it — the SEND on
// the maker's rank, the RECV on the other — and at one time the SENDs come first, then the RECVs,
// then the compute actions starting then. So all the messages of one time on one rank form one run.
Schedule lock_step_communication(Schedule schedule) {
  const Layout& layout = schedule.layout;
  const std::vector<std::vector<Slot>> slots = unit_slots(schedule);
  // When each piece of work a message carries is made, by (stage, micro-batch).
  std::map<std::pair<int, int>, int> forward_end, input_grad_end;
  for (int r = 0; r < schedule.ranks(); ++r) {
    const auto& list = schedule.actions[size_t(r)];
    for (size_t i = 0; i < list.size(); ++i) {
      const std::pair<int, int> key{layout.stage(r, list[i].chunk), list[i].microbatch};
      if (list[i].kind == ActionKind::forward) forward_end[key] = slots[size_t(r)][i].end;
      if (list[i].kind == ActionKind::backward || list[i].kind == ActionKind::backward_input)
        input_grad_end[key] = slots[size_t(r)][i].end;
    }
  }
  for (int r = 0; r < schedule.ranks(); ++r) {
    // Messages of one time are ordered by what they carry — activation before gradient, then the
    // stage boundary they cross, then the micro-batch — a key the sender and the receiver compute
    // alike, so both ends of a link list its messages in the same order (NCCL pairs them by order
    // alone). Compute actions of one time keep their list order (stable sort, key 0).
    struct Placed {
      int time, order;  // order at one time: 0 SEND, 1 RECV, 2 compute
      int gradient = 0, boundary = 0, microbatch = 0;
      Action action;
    };
    auto message = [&](int time, int order, const Action& a) {
      const int stage = layout.stage(r, a.chunk);
      // The boundary between stages b and b + 1 that the message crosses.
      const int boundary = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_gradient ? stage : stage - 1;
      const bool gradient = a.kind == ActionKind::send_gradient || a.kind == ActionKind::recv_gradient;
      return Placed{time, order, gradient ? 1 : 0, boundary, a.microbatch, a};
    };
    std::vector<Placed> placed;
    const auto& list = schedule.actions[size_t(r)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Slot& slot = slots[size_t(r)][i];
      placed.push_back({slot.start, 2, 0, 0, 0, list[i]});
      std::vector<Action> recvs, sends;
      messages_of(list[i], r, layout, recvs, sends);
      for (const Action& send : sends) placed.push_back(message(slot.end, 0, send));
      for (const Action& recv : recvs) {
        // Received when the neighbour's step that made it ends (stage s-1's F, or s+1's B or I).
        const int s = layout.stage(r, recv.chunk);
        const bool activation = recv.kind == ActionKind::recv_activation;
        const auto& made = activation ? forward_end : input_grad_end;
        placed.push_back(message(made.at({activation ? s - 1 : s + 1, recv.microbatch}), 1, recv));
      }
    }
    std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
      return std::tie(a.time, a.order, a.gradient, a.boundary, a.microbatch) <
             std::tie(b.time, b.order, b.gradient, b.boundary, b.microbatch);
    });
    std::vector<Action> with_messages;
    for (const Placed& p : placed) with_messages.push_back(p.action);
    schedule.actions[size_t(r)] = std::move(with_messages);
  }
  return schedule;
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
  }
  if (placement == MessagePlacement::lock_step) return lock_step_communication(std::move(schedule));
  for (int r = 0; r < int(schedule.actions.size()); ++r)
    for (size_t i = 0; i < schedule.actions[size_t(r)].size(); ++i)
      BRIGADE_CHECK(!schedule.actions[size_t(r)][i].overlapped, "add_communication: schedule '", schedule.name,
                    "' has overlapped pairs (rank ", r, ", step ", i, ": ",
                    describe(schedule.actions[size_t(r)][i], r, layout),
                    "), whose messages must go before and after the pair: use MessagePlacement::lock_step");
  for (int r = 0; r < int(schedule.actions.size()); ++r) {
    const std::vector<Action>& compute = schedule.actions[size_t(r)];
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
