// check_exchanges_headers_first: the NCCL transport's exchanges as comm/nccl.cpp runs them today
// (see exchange.h). A small model, separate from check_exchanges because the two transports differ
// in one rule: NCCL matches the messages between two ranks by their order, whatever they carry,
// and an exchange whose messages carry headers runs as two NCCL groups — every header, which the
// host waits for, then every payload. A group ends when all its operations have met their peers'.
// Only activations carry headers: the executor receives a gradient into a tensor shaped like the
// activation it answers (comm::Shapes::preset).
#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeline/exchange.h"
#include "pipeline/grid.h"
#include "pipeline/simulator.h"

namespace brigade::pipeline {

namespace {

struct Op {
  bool send;
  int peer;
};

}  // namespace

void check_exchanges_headers_first(const Schedule& schedule, bool varying_shapes) {
  const Layout& L = schedule.layout;
  const int P = schedule.ranks();
  // Each rank's groups, in order; for each group, where in the rank's list its exchange starts.
  std::vector<std::vector<std::vector<Op>>> groups(static_cast<size_t>(P));
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
      if (!headers.empty()) {
        groups[size_t(r)].push_back(std::move(headers));
        group_step[size_t(r)].push_back(e.first);
      }
      groups[size_t(r)].push_back(std::move(payloads));
      group_step[size_t(r)].push_back(e.first);
    }
  }
  // Walk: a rank posts its current group; an operation is done once its peer has posted the
  // matching one (the k-th send from a to b meets the k-th receive at b from a); a group ends when
  // all of it is done, and the rank posts its next one.
  std::map<std::pair<int, int>, int> sends_posted, recvs_posted;  // per (from, to)
  std::vector<size_t> current(size_t(P), 0);
  std::vector<std::vector<std::pair<Op, int>>> waiting(static_cast<size_t>(P));  // op, its number on the link
  std::vector<bool> posted(size_t(P), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      if (current[size_t(r)] >= groups[size_t(r)].size()) continue;
      if (!posted[size_t(r)]) {
        waiting[size_t(r)].clear();
        for (const Op& op : groups[size_t(r)][current[size_t(r)]]) {
          const auto link = op.send ? std::pair{r, op.peer} : std::pair{op.peer, r};
          waiting[size_t(r)].push_back({op, ++(op.send ? sends_posted : recvs_posted)[link]});
        }
        posted[size_t(r)] = progress = true;
      }
      bool done = true;
      for (const auto& [op, number] : waiting[size_t(r)]) {
        const auto link = op.send ? std::pair{r, op.peer} : std::pair{op.peer, r};
        done = done && (op.send ? recvs_posted[link] : sends_posted[link]) >= number;
      }
      if (done) {
        ++current[size_t(r)];
        posted[size_t(r)] = false;
        progress = true;
      }
    }
  }
  std::vector<GridMark> marks;
  std::vector<int> stuck;
  for (int r = 0; r < P; ++r) {
    if (current[size_t(r)] >= groups[size_t(r)].size()) continue;
    stuck.push_back(r);
    marks.push_back({r, int(group_step[size_t(r)][current[size_t(r)]]), '!'});
  }
  if (stuck.empty()) return;
  std::ostringstream problem;
  problem << "on NCCL, ranks";
  for (int r : stuck) problem << " " << r;
  problem << " would wait for each other until the timeout: an exchange waits for an activation's header its peer "
             "sends only after this exchange's data arrived (comm/nccl.cpp sends headers, then data; docs/comm.md, "
             "known limitation)";
  std::ostringstream what;
  what << "check_exchanges_headers_first: schedule '" << schedule.name << "' (P=" << P << ", M=" << schedule.microbatches
       << ", V=" << schedule.chunks() << (varying_shapes ? ", varying shapes" : "") << "): " << problem.str()
       << ". On NCCL every schedule runs with fixed shapes; with varying shapes all but naive with M >= 2, zb-h1 "
          "with M > P and interleaved with M = P (P >= 3).\n\n"
       << action_grid(schedule, marks) << "\n! marks the exchange each stuck rank waits in\n";
  throw ScheduleError(what.str(), problem.str(), stuck.front(), marks.front().step);
}

}  // namespace brigade::pipeline
