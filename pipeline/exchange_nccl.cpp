// check_exchanges_headers_first: the NCCL transport's exchanges as comm/nccl.cpp runs them (see
// exchange.h). A small model, separate from check_exchanges because the two transports differ: NCCL
// matches the messages between two ranks by their order, whatever they carry, and it runs each
// communicator's groups one after another on a stream while the host goes on. An exchange whose
// messages carry headers posts them first, on a communicator and stream of their own, and the host
// waits for the arriving ones; then it queues the data as one group on the data communicator's
// stream and moves on without waiting. Only activations carry headers: the executor receives a
// gradient into a tensor shaped like the activation it answers (comm::Shapes::preset).
#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeline/exchange.h"
#include "pipeline/analysis/grid.h"
#include "pipeline/analysis/simulator.h"

namespace brigade::pipeline {

namespace {

struct Op {
  bool send;
  int peer;
};

}  // namespace

namespace {

// What a message carries, as both of its ends see it: activation or gradient, the stage boundary it
// crosses (between b and b + 1), its micro-batch.
struct Payload {
  bool gradient;
  int boundary, microbatch;
  bool operator==(const Payload&) const = default;
};

Payload payload_of(const Action& a, int rank, const Layout& L) {
  const int stage = L.stage(rank, a.chunk);
  const bool gradient = a.kind == ActionKind::send_gradient || a.kind == ActionKind::recv_gradient;
  const bool boundary_below = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_gradient;
  return {gradient, boundary_below ? stage : stage - 1, a.microbatch};
}

// NCCL pairs the k-th send from a to b with the k-th receive at b from a, whatever each carries: the
// two lists must name the same messages in the same order, or a tensor lands in the wrong buffer
// (an activation where a gradient of the same shape was expected: wrong numbers, no error).
void check_link_order(const Schedule& schedule) {
  const Layout& L = schedule.layout;
  std::map<std::pair<int, int>, std::vector<std::pair<Payload, int>>> sent, received;  // link -> (payload, step)
  for (int r = 0; r < schedule.ranks(); ++r) {
    const auto& list = schedule.actions[size_t(r)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_send(a.kind) && !is_recv(a.kind)) continue;
      const int peer = L.rank_of(L.peer_stage(a, r));
      if (is_send(a.kind)) sent[{r, peer}].push_back({payload_of(a, r, L), int(i)});
      else received[{peer, r}].push_back({payload_of(a, r, L), int(i)});
    }
  }
  for (const auto& [link, sends] : sent) {
    const auto& recvs = received[link];
    for (size_t k = 0; k < std::min(sends.size(), recvs.size()); ++k) {
      if (sends[k].first == recvs[k].first) continue;
      const Action& s = schedule.actions[size_t(link.first)][size_t(sends[k].second)];
      const Action& r = schedule.actions[size_t(link.second)][size_t(recvs[k].second)];
      std::ostringstream problem;
      problem << "on NCCL, message " << k + 1 << " from rank " << link.first << " to rank " << link.second << " would be "
              << describe(s, link.first, L) << " (rank " << link.first << ", step " << sends[k].second
              << ") but rank " << link.second << " expects " << describe(r, link.second, L) << " (step "
              << recvs[k].second << "): NCCL matches a link's messages by order, so one would land in the other's buffer";
      std::ostringstream what;
      what << "check_exchanges_headers_first: schedule '" << schedule.name << "': " << problem.str() << ".\n\n"
           << action_grid(schedule, {{link.first, sends[k].second, '!'}, {link.second, recvs[k].second, '!'}})
           << "\n! marks the two messages\n";
      throw ScheduleError(what.str(), problem.str(), link.first, sends[k].second);
    }
  }
}

}  // namespace

void check_exchanges_headers_first(const Schedule& schedule, bool varying_shapes) {
  check_link_order(schedule);
  const Layout& L = schedule.layout;
  const int P = schedule.ranks();
  // Per rank, per exchange: its headers ([0], maybe none) and its data ([1]); and where in the
  // rank's list the exchange starts.
  std::vector<std::array<std::vector<std::vector<Op>>, 2>> groups(static_cast<size_t>(P));
  std::vector<std::vector<size_t>> group_step(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    const auto& list = schedule.actions[size_t(r)];
    std::map<std::tuple<bool, int, bool, int>, bool> seen;  // (send?, peer, activation?, boundary)
    for (const ExchangeStep& e : exchange_steps(list)) {
      if (!e.exchange) continue;
      std::vector<Op> headers, payloads;
      for (size_t i = e.first; i < e.first + e.count; ++i) {
        const Action& a = list[i];
        const int stage = L.stage(r, a.chunk), peer_stage = L.peer_stage(a, r);
        const int peer = L.rank_of(peer_stage);
        const bool activation = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_activation;
        // An activation carries a header on its channel's first message, or on every message when
        // shapes vary. A gradient never does: its receiver knows its tensor (comm::Shapes::preset).
        const bool first = seen.emplace(std::tuple{is_send(a.kind), peer, activation, std::min(stage, peer_stage)}, true).second;
        if (activation && (first || varying_shapes)) headers.push_back({is_send(a.kind), peer});
        payloads.push_back({is_send(a.kind), peer});
      }
      groups[size_t(r)][0].push_back(std::move(headers));
      groups[size_t(r)][1].push_back(std::move(payloads));
      group_step[size_t(r)].push_back(e.first);
    }
  }
  // Walk three cursors per rank: its host (which exchange it is in), its header stream and its data
  // stream (which group each runs). The host issues exchange k's headers, waits for them if some
  // arrive, issues its data and goes to k + 1. A stream runs the groups issued to it in order; an
  // operation is done once its peer's stream runs the matching one (on that communicator, the k-th
  // send from a to b meets the k-th receive at b from a); a group ends when all of it is done.
  struct Channel {
    std::map<std::pair<int, int>, int> sends_posted, recvs_posted;  // per (from, to)
    std::vector<size_t> cursor;                                     // the group each rank's stream runs
    std::vector<bool> posted;
    std::vector<std::vector<std::pair<Op, int>>> waiting;  // op, its number on the link
  };
  Channel channel[2];  // 0: headers, 1: data
  for (Channel& c : channel) {
    c.cursor.assign(size_t(P), 0);
    c.posted.assign(size_t(P), false);
    c.waiting.resize(size_t(P));
  }
  std::vector<size_t> host(size_t(P), 0);  // the exchange each rank's host is in
  auto count = [&](int r) { return groups[size_t(r)][0].size(); };
  // Advances rank r's stream on channel c as far as it can; true if it moved.
  auto run_stream = [&](Channel& c, int r, const std::vector<std::vector<Op>>& list) {
    bool moved = false;
    while (c.cursor[size_t(r)] < host[size_t(r)] + (&c == &channel[0] ? 1 : 0) && c.cursor[size_t(r)] < list.size()) {
      const auto& group = list[c.cursor[size_t(r)]];
      if (!c.posted[size_t(r)]) {
        c.waiting[size_t(r)].clear();
        for (const Op& op : group) {
          const auto link = op.send ? std::pair{r, op.peer} : std::pair{op.peer, r};
          c.waiting[size_t(r)].push_back({op, ++(op.send ? c.sends_posted : c.recvs_posted)[link]});
        }
        c.posted[size_t(r)] = moved = true;
      }
      bool done = true;
      for (const auto& [op, number] : c.waiting[size_t(r)]) {
        const auto link = op.send ? std::pair{r, op.peer} : std::pair{op.peer, r};
        done = done && (op.send ? c.recvs_posted[link] : c.sends_posted[link]) >= number;
      }
      if (!done) break;
      ++c.cursor[size_t(r)];
      c.posted[size_t(r)] = false;
      moved = true;
    }
    return moved;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      // The header stream may run exchange host[r]'s headers (issued), the data stream only earlier ones.
      progress = run_stream(channel[0], r, groups[size_t(r)][0]) || progress;
      progress = run_stream(channel[1], r, groups[size_t(r)][1]) || progress;
      const size_t k = host[size_t(r)];
      if (k >= count(r)) continue;
      const bool waits = std::any_of(groups[size_t(r)][0][k].begin(), groups[size_t(r)][0][k].end(),
                                     [](const Op& op) { return !op.send; });
      if (!waits || channel[0].cursor[size_t(r)] > k) {
        ++host[size_t(r)];
        progress = true;
      }
    }
  }
  std::vector<GridMark> marks;
  std::vector<int> stuck;
  for (int r = 0; r < P; ++r) {
    // The earliest exchange not finished: where the host waits, or data still queued.
    const size_t k = std::min({host[size_t(r)], channel[0].cursor[size_t(r)], channel[1].cursor[size_t(r)]});
    if (k >= count(r)) continue;
    stuck.push_back(r);
    marks.push_back({r, int(group_step[size_t(r)][k]), '!'});
  }
  if (stuck.empty()) return;
  std::ostringstream problem;
  problem << "on NCCL, ranks";
  for (int r : stuck) problem << " " << r;
  problem << " would wait for each other until the timeout: each waits for a header, or for data NCCL has "
             "queued behind a message its peer has not posted (comm/nccl.cpp runs a communicator's groups in order)";
  std::ostringstream what;
  what << "check_exchanges_headers_first: schedule '" << schedule.name << "' (P=" << P << ", M=" << schedule.microbatches
       << ", V=" << schedule.chunks() << (varying_shapes ? ", varying shapes" : "") << "): " << problem.str()
       << ".\n\n"
       << action_grid(schedule, marks) << "\n! marks the exchange each stuck rank waits in\n";
  throw ScheduleError(what.str(), problem.str(), stuck.front(), marks.front().step);
}

}  // namespace brigade::pipeline
