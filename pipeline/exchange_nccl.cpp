// check_exchanges_headers_first: the NCCL transport's exchanges as comm/nccl.cpp runs them (see
// exchange.h). A small model, separate from check_exchanges because the two transports differ: NCCL
// matches the messages between two ranks by their order, whatever they carry, and it runs each
// communicator's groups one after another on a stream while the host goes on. Each brigade
// communicator is three NCCL communicators, the lanes here: headers, data going to a higher rank,
// data going to a lower one. Entering an exchange, a host queues its headers (one group) and its
// early data: every send, and the receives whose tensors are known. If headers arrive, it waits
// for them, then queues the late data: the receives that needed them. Only activations carry
// headers: the executor receives a gradient into a tensor shaped like the activation it answers
// (comm::Shapes::preset). And a host may read what it received (an index check, a loss's item()),
// so the model has every host wait for its received data before going on — the worst case.
// The model takes every link as connected: real NCCL connects a link at its first use and the host
// waits there for the peer's group, which no schedule could order around, so the Executor
// connects every link the schedule sends on before the first step (Communicator::connect) and the model
// need not know first use.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeline/exchange.h"
#include "pipeline/analysis/grid.h"
#include "pipeline/analysis/simulator.h"

namespace brigade::pipeline {

namespace {

// One send or receive as NCCL sees it.
struct Op {
  bool send;
  int peer;
};

// The NCCL communicators of one brigade communicator, each with a stream of its own (NcclComms in
// comm/nccl.cpp): one for headers, and one per direction for the data.
enum Lane : size_t { kHeaders = 0, kUp = 1, kDown = 2, kLanes = 3 };

// The data lane of a message from rank `from` to rank `to`. With one data lane instead, two ranks
// that send each other an activation with a header in one exchange would each queue the other's
// receive behind its own send (interleaved and the Vs with varying shapes: 159 of the 978
// configurations the tests check).
size_t data_lane(int from, int to) { return from < to ? kUp : kDown; }

// What a rank issues for one exchange: on the header lane one group; on each data lane an early
// group (issued on entering the exchange: every send, and the receives whose tensor is known) and a
// late one (issued once the incoming headers are in: a receive that waits for a header, and every
// receive after it from the same peer, which NCCL must see in the link's order).
struct ExchangePlan {
  size_t step = 0;  // where the exchange starts in the rank's list
  std::vector<Op> headers;
  std::array<std::vector<Op>, kLanes> early, late;  // [kHeaders] unused
  bool waits_for_headers = false;                   // some header arrives
  std::array<bool, kLanes> receives{};              // the lane carries a receive of this exchange
};

// The plans of one rank's exchanges, in order. `seen` tracks each channel's first message: an
// activation carries a header then, or on every message when shapes vary; a gradient never does
// (its receiver knows its tensor: comm::Shapes::preset).
std::vector<ExchangePlan> plan_exchanges(const Schedule& schedule, int r, bool varying_shapes) {
  const Layout& L = schedule.layout;
  const auto& list = schedule.actions[size_t(r)];
  std::set<std::tuple<bool, int, bool, int>> seen;  // (send?, peer, activation?, boundary)
  std::vector<ExchangePlan> plans;
  for (const ExchangeStep& e : exchange_steps(list)) {
    if (!e.exchange) continue;
    ExchangePlan plan;
    plan.step = e.first;
    std::set<int> late_from;  // peers whose receives in this exchange wait for a header
    for (size_t i = e.first; i < e.first + e.count; ++i) {
      const Action& a = list[i];
      const int stage = L.stage(r, a.chunk), peer_stage = L.peer_stage(a, r);
      const Op op{is_send(a.kind), L.rank_of(peer_stage)};
      const bool activation = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_activation;
      const bool first = seen.emplace(op.send, op.peer, activation, std::min(stage, peer_stage)).second;
      const bool header = activation && (first || varying_shapes);
      if (header) plan.headers.push_back(op);
      plan.waits_for_headers = plan.waits_for_headers || (header && !op.send);
      const size_t lane = op.send ? data_lane(r, op.peer) : data_lane(op.peer, r);
      const bool late = !op.send && (header || late_from.count(op.peer));
      if (late) late_from.insert(op.peer);
      (late ? plan.late : plan.early)[lane].push_back(op);
      if (!op.send) plan.receives[lane] = true;
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

// One lane of every rank: its groups in issue order, how many each rank has issued, the group each
// rank's stream runs. On a lane's communicator the k-th send from a to b meets the k-th receive at b
// from a; an operation is done once its peer's stream runs the matching one; a group ends when all
// of it is done, and a stream runs its groups one after another.
class LaneModel {
 public:
  explicit LaneModel(int ranks) : groups_(size_t(ranks)), issued_(size_t(ranks), 0), cursor_(size_t(ranks), 0),
                                  posted_(size_t(ranks), false), waiting_(size_t(ranks)) {}

  void add_group(int r, std::vector<Op> group) { groups_[size_t(r)].push_back(std::move(group)); }
  void issue_through(int r, size_t groups) { issued_[size_t(r)] = std::max(issued_[size_t(r)], groups); }
  size_t done(int r) const { return cursor_[size_t(r)]; }  // groups of rank r that ended

  // Runs rank r's stream as far as it goes; true if it moved.
  bool run(int r) {
    bool moved = false;
    size_t& cursor = cursor_[size_t(r)];
    while (cursor < issued_[size_t(r)] && cursor < groups_[size_t(r)].size()) {
      if (!posted_[size_t(r)]) {
        post(r, groups_[size_t(r)][cursor]);
        moved = true;
      }
      if (!group_done(r)) break;
      ++cursor;
      posted_[size_t(r)] = false;
      moved = true;
    }
    return moved;
  }

 private:
  using Link = std::pair<int, int>;  // (from, to)
  static Link link_of(int r, const Op& op) { return op.send ? Link{r, op.peer} : Link{op.peer, r}; }

  void post(int r, const std::vector<Op>& group) {
    waiting_[size_t(r)].clear();
    for (const Op& op : group)
      waiting_[size_t(r)].push_back({op, ++(op.send ? sends_posted_ : recvs_posted_)[link_of(r, op)]});
    posted_[size_t(r)] = true;
  }
  bool group_done(int r) {
    for (const auto& [op, number] : waiting_[size_t(r)])
      if ((op.send ? recvs_posted_ : sends_posted_)[link_of(r, op)] < number) return false;
    return true;
  }

  std::vector<std::vector<std::vector<Op>>> groups_;  // [rank][group]
  std::vector<size_t> issued_, cursor_;
  std::vector<bool> posted_;
  std::vector<std::vector<std::pair<Op, int>>> waiting_;  // op, its number on its link
  std::map<Link, int> sends_posted_, recvs_posted_;
};

// Where a rank's host is in its current exchange: about to enter it, waiting for its headers, or
// waiting for its received data.
enum class Phase { enter, headers, data };

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

namespace {

// Every rank's host and lanes, walked until nothing moves. A host enters an exchange and issues its
// headers and early data; once the incoming headers are in (if any), the late data; then it waits
// for the data it received, as if every exchange were read on the host at once (an index check, a
// loss's item()): a host that reads later, or never, waits less.
class NcclModel {
 public:
  NcclModel(const Schedule& schedule, bool varying_shapes)
      : s_(schedule), varying_(varying_shapes), P_(schedule.ranks()), plans_(size_t(P_)),
        lanes_{LaneModel(P_), LaneModel(P_), LaneModel(P_)}, at_(size_t(P_), 0), phase_(size_t(P_), Phase::enter) {
    for (int r = 0; r < P_; ++r) {
      plans_[size_t(r)] = plan_exchanges(s_, r, varying_);
      for (const ExchangePlan& plan : plans_[size_t(r)]) {
        lanes_[kHeaders].add_group(r, plan.headers);  // exchange k's: group k
        for (size_t lane : {kUp, kDown}) {
          lanes_[lane].add_group(r, plan.early[lane]);  // group 2k
          lanes_[lane].add_group(r, plan.late[lane]);   // group 2k + 1
        }
      }
    }
  }

  void run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < P_; ++r) {
        for (LaneModel& lane : lanes_) progress = lane.run(r) || progress;
        while (step_host(r)) progress = true;
      }
    }
    report_stuck();
  }

 private:
  // Moves rank r's host one phase on; false if it waits (or has finished).
  bool step_host(int r) {
    const size_t k = at_[size_t(r)];
    if (k >= plans_[size_t(r)].size()) return false;
    const ExchangePlan& plan = plans_[size_t(r)][k];
    Phase& phase = phase_[size_t(r)];
    switch (phase) {
      case Phase::enter:
        lanes_[kHeaders].issue_through(r, k + 1);
        for (size_t lane : {kUp, kDown}) lanes_[lane].issue_through(r, 2 * k + 1);
        phase = Phase::headers;
        return true;
      case Phase::headers:
        // The host waits for the header stream, which runs the exchange's header group last.
        if (plan.waits_for_headers && lanes_[kHeaders].done(r) <= k) return false;
        for (size_t lane : {kUp, kDown}) lanes_[lane].issue_through(r, 2 * k + 2);
        phase = Phase::data;
        return true;
      case Phase::data:
        // The caller's stream waits for each lane that received, after the exchange's groups on it.
        for (size_t lane : {kUp, kDown})
          if (plan.receives[lane] && lanes_[lane].done(r) < 2 * k + 2) return false;
        ++at_[size_t(r)];
        phase = Phase::enter;
        return true;
    }
    return false;
  }

  [[noreturn]] void fail(const std::vector<int>& stuck, const std::vector<GridMark>& marks) const {
    std::ostringstream problem;
    problem << "on NCCL, ranks";
    for (int r : stuck) problem << " " << r;
    problem << " would wait for each other until the timeout: each waits for a header, for data it received, or "
               "for data NCCL has queued behind a message its peer has not posted (comm/nccl.cpp runs a "
               "communicator's groups in order)";
    std::ostringstream what;
    what << "check_exchanges_headers_first: schedule '" << s_.name << "' (P=" << P_ << ", M=" << s_.microbatches
         << ", V=" << s_.chunks() << (varying_ ? ", varying shapes" : "") << "): " << problem.str() << ".\n\n"
         << action_grid(s_, marks) << "\n! marks the exchange each stuck rank waits in\n";
    throw ScheduleError(what.str(), problem.str(), stuck.front(), marks.front().step);
  }

  void report_stuck() const {
    std::vector<GridMark> marks;
    std::vector<int> stuck;
    for (int r = 0; r < P_; ++r) {
      // The earliest exchange not finished: where the host waits, or a group still queued.
      const size_t k = std::min({at_[size_t(r)], lanes_[kHeaders].done(r), lanes_[kUp].done(r) / 2,
                                 lanes_[kDown].done(r) / 2});
      if (k >= plans_[size_t(r)].size()) continue;
      stuck.push_back(r);
      marks.push_back({r, int(plans_[size_t(r)][k].step), '!'});
    }
    if (!stuck.empty()) fail(stuck, marks);
  }

  const Schedule& s_;
  const bool varying_;
  const int P_;
  std::vector<std::vector<ExchangePlan>> plans_;  // [rank][exchange]
  std::array<LaneModel, kLanes> lanes_;
  std::vector<size_t> at_;     // [rank]: the exchange its host is in
  std::vector<Phase> phase_;  // [rank]: and how far
};

}  // namespace

void check_exchanges_headers_first(const Schedule& schedule, bool varying_shapes) {
  check_link_order(schedule);
  NcclModel(schedule, varying_shapes).run();
}

}  // namespace brigade::pipeline
