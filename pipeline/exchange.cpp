// Exchange steps and the rendezvous check (see exchange.h).
//
// The check is a small model of the runtime. Every SEND is first paired with the RECV that will
// take its message: messages travel on channels — (sender rank, receiver rank, activation or
// gradient, stage boundary crossed) — and the k-th SEND on a channel meets the k-th RECV on it.
// Then every rank walks its steps: a compute step finishes at once; an exchange step waits until
// each of its messages has moved, and a message moves only while both its SEND's and its RECV's
// exchanges are current. If the walk stalls with ranks left over, they wait for each other forever.
#include "pipeline/exchange.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "comm/communicator.h"
#include "pipeline/analysis/grid.h"
#include "pipeline/analysis/simulator.h"

namespace brigade::pipeline {

std::vector<ExchangeStep> exchange_steps(const std::vector<Action>& actions) {
  std::vector<ExchangeStep> steps;
  for (size_t i = 0; i < actions.size(); ++i) {
    const bool message = !is_compute(actions[i].kind);
    if (message && !steps.empty() && steps.back().exchange) {
      ++steps.back().count;  // the run of messages goes on
    } else {
      steps.push_back({message, i, 1});
    }
  }
  return steps;
}

namespace {

// Where an action sits: rank and index in that rank's list (the grid's step).
struct Place {
  int rank = -1;
  int index = -1;
};

class ExchangeChecker {
 public:
  explicit ExchangeChecker(const Schedule& schedule) : s_(schedule), P_(schedule.ranks()) {}

  void run() {
    BRIGADE_CHECK(int(s_.actions.size()) == P_, "check_exchanges: schedule '", s_.name, "' has action lists for ",
                  s_.actions.size(), " ranks, but its layout has P=", P_);
    pair_messages();
    walk();
  }

 private:
  void pair_messages();
  void walk();
  // Runs rank r until it finishes or blocks in an exchange; wakes the ranks it unblocks.
  void advance(int r);
  [[noreturn]] void report_deadlock() const;
  [[noreturn]] void fail_at(int rank, int index, const std::string& problem, std::vector<GridMark> marks) const;

  std::string what(Place p) const {
    return describe(s_.actions[size_t(p.rank)][size_t(p.index)], p.rank, s_.layout);
  }
  // "the exchange at steps 3-5" or "the exchange at step 3".
  std::string exchange_name(int rank, size_t step) const {
    const ExchangeStep& e = steps_[size_t(rank)][step];
    std::ostringstream os;
    os << "the exchange at step" << (e.count > 1 ? "s " : " ") << e.first;
    if (e.count > 1) os << "-" << e.first + e.count - 1;
    return os.str();
  }

  const Schedule& s_;
  const int P_;
  std::vector<std::vector<ExchangeStep>> steps_;  // [rank]
  std::vector<std::vector<size_t>> step_of_;      // [rank][action index]: which step holds it
  std::vector<std::vector<Place>> partner_;       // [rank][action index]: the other end of a message
  std::vector<std::vector<char>> moved_;          // [rank][action index]: the message has moved
  std::vector<size_t> current_;                   // [rank]: the step the rank is in (or steps' size)
  std::vector<int> pending_;                      // [rank]: unmoved messages of the current exchange; -1: not in one
  std::vector<int> awake_;
};

void ExchangeChecker::pair_messages() {
  const Layout& L = s_.layout;
  steps_.resize(size_t(P_));
  step_of_.resize(size_t(P_));
  partner_.resize(size_t(P_));
  moved_.resize(size_t(P_));
  // channel -> the SENDs and the RECVs on it, in list order (each rank's list is walked in order, and
  // only one rank sends and one receives on a channel, so these are the orders the messages take).
  using Channel = std::tuple<int, int, bool, int>;  // from rank, to rank, activation?, boundary
  std::map<Channel, std::pair<std::vector<Place>, std::vector<Place>>> channels;
  for (int r = 0; r < P_; ++r) {
    const auto& list = s_.actions[size_t(r)];
    steps_[size_t(r)] = exchange_steps(list);
    step_of_[size_t(r)].resize(list.size());
    for (size_t k = 0; k < steps_[size_t(r)].size(); ++k) {
      const ExchangeStep& e = steps_[size_t(r)][k];
      for (size_t i = e.first; i < e.first + e.count; ++i) step_of_[size_t(r)][i] = k;
    }
    partner_[size_t(r)].assign(list.size(), Place{});
    moved_[size_t(r)].assign(list.size(), 0);
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (is_compute(a.kind)) continue;
      const int here = int(i);
      if (a.chunk < 0 || a.chunk >= L.chunks) {
        fail_at(r, here, "chunk " + std::to_string(a.chunk) + " does not exist (V=" + std::to_string(L.chunks) + ")",
                {});
      }
      const int peer_stage = L.peer_stage(a, r);
      const int peer = peer_stage < 0 ? -1 : L.rank_of(peer_stage);
      if (peer < 0 || peer == r) {
        fail_at(r, here, peer < 0 ? "the message would leave the pipeline" : "a message to its own rank", {});
      }
      const bool activation = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_activation;
      // The boundary between stages b and b + 1 that the message crosses.
      const int stage = L.stage(r, a.chunk);
      const int lower = std::min(stage, peer_stage);
      const Channel key = is_send(a.kind) ? Channel{r, peer, activation, lower} : Channel{peer, r, activation, lower};
      auto& [sends, recvs] = channels[key];
      (is_send(a.kind) ? sends : recvs).push_back({r, here});
    }
  }
  for (const auto& [key, ends] : channels) {
    const auto& [sends, recvs] = ends;
    for (size_t k = 0; k < std::max(sends.size(), recvs.size()); ++k) {
      if (k >= recvs.size()) {
        const Place p = sends[k];
        fail_at(p.rank, p.index,
                "SEND without a matching RECV: rank " + std::to_string(std::get<1>(key)) +
                    " never receives this message (a rendezvous send would wait for it forever)",
                {});
      }
      if (k >= sends.size()) {
        const Place p = recvs[k];
        fail_at(p.rank, p.index,
                "RECV without a matching SEND: rank " + std::to_string(std::get<0>(key)) + " never sends this message",
                {});
      }
      const Place send = sends[k], recv = recvs[k];
      const Action& sa = s_.actions[size_t(send.rank)][size_t(send.index)];
      const Action& ra = s_.actions[size_t(recv.rank)][size_t(recv.index)];
      // Same channel means same boundary, so the chunks agree with it on both ends by construction;
      // what can still differ is the micro-batch.
      if (sa.microbatch != ra.microbatch) {
        std::ostringstream why;
        why << "message mismatch: the message this RECV gets is the one sent by " << what(send) << " (rank "
            << send.rank << ", step " << send.index << "), as messages between two ranks arrive in the order "
            << "they were sent";
        fail_at(recv.rank, recv.index, why.str(), {{send.rank, send.index, '!'}});
      }
      partner_[size_t(send.rank)][size_t(send.index)] = recv;
      partner_[size_t(recv.rank)][size_t(recv.index)] = send;
    }
  }
}

void ExchangeChecker::walk() {
  current_.assign(size_t(P_), 0);
  pending_.assign(size_t(P_), -1);
  for (int r = P_ - 1; r >= 0; --r) awake_.push_back(r);
  while (!awake_.empty()) {
    const int r = awake_.back();
    awake_.pop_back();
    advance(r);
  }
  for (int r = 0; r < P_; ++r) {
    if (current_[size_t(r)] < steps_[size_t(r)].size()) report_deadlock();
  }
}

void ExchangeChecker::advance(int r) {
  const auto& steps = steps_[size_t(r)];
  size_t& k = current_[size_t(r)];
  int& pending = pending_[size_t(r)];
  while (k < steps.size()) {
    const ExchangeStep& e = steps[k];
    if (!e.exchange) {
      ++k;
      continue;
    }
    if (pending < 0) {
      // Entering the exchange: every message whose partner's exchange is current moves now; the
      // others move when their partner enters (the partner then does this for them).
      pending = int(e.count);
      for (size_t i = e.first; i < e.first + e.count; ++i) {
        const Place peer = partner_[size_t(r)][i];
        const bool peer_is_there = current_[size_t(peer.rank)] == step_of_[size_t(peer.rank)][size_t(peer.index)] &&
                                   pending_[size_t(peer.rank)] >= 0;
        if (!peer_is_there) continue;
        moved_[size_t(r)][i] = moved_[size_t(peer.rank)][size_t(peer.index)] = 1;
        --pending;
        if (--pending_[size_t(peer.rank)] == 0) awake_.push_back(peer.rank);
      }
    }
    if (pending > 0) return;  // blocked until the partners arrive
    ++k;
    pending = -1;
  }
}

void ExchangeChecker::report_deadlock() const {
  std::ostringstream why;
  std::vector<GridMark> marks;
  std::vector<int> blocked;
  for (int r = 0; r < P_; ++r) {
    if (current_[size_t(r)] < steps_[size_t(r)].size()) blocked.push_back(r);
  }
  why << "deadlock under rendezvous semantics: rank" << (blocked.size() > 1 ? "s " : " ");
  for (size_t b = 0; b < blocked.size(); ++b)
    why << (b == 0 ? "" : b + 1 == blocked.size() ? " and " : ", ") << blocked[b];
  why << " wait for each other forever";
  const std::string problem = why.str();

  why << ".\nWith a transport whose sends complete only when the peer receives (gloo, NCCL for large tensors), "
         "a rank blocked in an exchange waits until every message in it has moved, and a message moves only "
         "while its sender and its receiver are both in the exchanges holding it:\n";
  for (int r : blocked) {
    const size_t k = current_[size_t(r)];
    const ExchangeStep& e = steps_[size_t(r)][k];
    marks.push_back({r, int(e.first), '!'});
    why << "  rank " << r << " is blocked in " << exchange_name(r, k) << "; it waits for\n";
    for (size_t i = e.first; i < e.first + e.count; ++i) {
      if (moved_[size_t(r)][i]) continue;
      const Place peer = partner_[size_t(r)][i];
      const size_t peer_now = current_[size_t(peer.rank)];
      why << "    " << what({r, int(i)}) << ": rank " << peer.rank
          << (is_send(s_.actions[size_t(r)][i].kind) ? " receives it in " : " sends it in ")
          << exchange_name(peer.rank, step_of_[size_t(peer.rank)][size_t(peer.index)]) << ", but is ";
      if (peer_now < steps_[size_t(peer.rank)].size()) {
        why << "blocked in " << exchange_name(peer.rank, peer_now) << "\n";
      } else {
        why << "finished\n";  // unreachable: a rank finishes only once all its messages moved
      }
    }
  }
  why << "Messages two ranks trade with each other must sit in exchanges that are current together: "
         "consecutive SEND/RECV actions form one exchange, so send and receive in one run of messages.";
  // Every rank that is not blocked has finished: compute steps never wait.
  const bool finished = blocked.size() < size_t(P_);
  for (int r = 0; r < P_; ++r) {
    if (current_[size_t(r)] >= steps_[size_t(r)].size())
      marks.push_back({r, int(s_.actions[size_t(r)].size()), '*'});
  }
  std::ostringstream os;
  os << "check_exchanges: schedule '" << s_.name << "' (P=" << P_ << ", M=" << s_.microbatches
     << ", V=" << s_.chunks() << "): " << why.str() << "\n\n"
     << action_grid(s_, marks) << "\n! marks the first action of each blocked exchange"
     << (finished ? "; * (end) the ranks that finished" : "") << "\n";
  const int r0 = blocked.front();
  throw ScheduleError(os.str(), problem, r0, int(steps_[size_t(r0)][current_[size_t(r0)]].first));
}

void ExchangeChecker::fail_at(int rank, int index, const std::string& problem, std::vector<GridMark> marks) const {
  marks.push_back({rank, index, '!'});
  std::ostringstream os;
  os << "check_exchanges: schedule '" << s_.name << "' (P=" << P_ << ", M=" << s_.microbatches
     << ", V=" << s_.chunks() << ") fails at rank " << rank << ", step " << index << ", "
     << what({rank, index}) << ": " << problem << "\n\n"
     << action_grid(s_, marks) << "\n! marks the failing action(s)\n";
  throw ScheduleError(os.str(), problem, rank, index);
}

}  // namespace

void check_exchanges(const Schedule& schedule) { ExchangeChecker(schedule).run(); }

void check_exchanges_for(const comm::Communicator& comm, const Schedule& schedule, bool varying_shapes) {
  if (schedule.ranks() < 2) return;
  if (!comm.queues_sends()) check_exchanges(schedule);
  if (comm.matches_messages_in_order()) check_exchanges_headers_first(schedule, varying_shapes);
}

}  // namespace brigade::pipeline
