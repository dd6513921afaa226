// Exchange steps and the rendezvous check: how a rank's list splits into blocking steps (checked on
// hand-written lists), every generated schedule being safe when sends wait for their receivers, and
// schedules that the simulator accepts but that would hang on such a transport — found by
// check_exchanges and, independently, by a brute-force model in this file.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"
#include "pipeline/exchange.h"
#include "pipeline/slots.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_csv.h"
#include "pipeline/analysis/simulator.h"
#include "every_schedule.h"
#include "test_util.h"

using namespace brigade;
using namespace brigade::pipeline;
using test::grid_line;

namespace {

Action send_a(int m, int c = 0) { return {ActionKind::send_activation, m, c}; }
Action recv_a(int m, int c = 0) { return {ActionKind::recv_activation, m, c}; }
Action send_g(int m, int c = 0) { return {ActionKind::send_gradient, m, c}; }
Action recv_g(int m, int c = 0) { return {ActionKind::recv_gradient, m, c}; }

// Steps as "c0 x1+2 c3": c for compute, x for an exchange, then its first action (+ count when > 1).
std::string steps_text(const std::vector<Action>& actions) {
  std::ostringstream out;
  for (const ExchangeStep& s : exchange_steps(actions)) {
    if (out.tellp() > 0) out << ' ';
    out << (s.exchange ? 'x' : 'c') << s.first;
    if (s.count != 1) out << '+' << s.count;
  }
  return out.str();
}

Schedule two_ranks(const std::string& name, int microbatches, std::vector<Action> rank0, std::vector<Action> rank1) {
  Schedule s;
  s.name = name;
  s.layout = Layout{2, 1};
  s.microbatches = microbatches;
  s.actions = {std::move(rank0), std::move(rank1)};
  return s;
}

ScheduleError exchange_error(const Schedule& s) {
  try {
    check_exchanges(s);
  } catch (const ScheduleError& e) {
    return e;
  }
  FAIL("check_exchanges accepted schedule '" << s.name << "'");
  throw;  // unreachable
}


// "the exchange at step 5" or "the exchange at steps 5-7", for the run of messages starting at `first`.
std::string exchange_at(const std::vector<Action>& list, size_t first) {
  size_t last = first;
  while (last + 1 < list.size() && !is_compute(list[last + 1].kind)) ++last;
  if (last == first) return "the exchange at step " + std::to_string(first);
  return "the exchange at steps " + std::to_string(first) + "-" + std::to_string(last);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// An independent model of rendezvous exchanges, written for clarity over speed: messages are
// identified by what they carry — (activation?, micro-batch, lower stage of the boundary) — which is
// unique in a schedule the simulator accepts. Each round, every rank skips its compute actions, and
// a message moves when both ranks stand in a run of messages that reaches it; a rank leaves its run
// when all of the run has moved. Returns, per rank, where it is stuck (its list's size when done).
std::vector<size_t> brute_force_rendezvous(const Schedule& s) {
  const int P = s.ranks();
  using Id = std::tuple<bool, int, int>;
  auto id = [&](int r, const Action& a) {
    const bool activation = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_activation;
    const int stage = s.layout.stage(r, a.chunk);
    const int peer = s.layout.peer_stage(a, r);
    return Id{activation, a.microbatch, std::min(stage, peer)};
  };
  std::map<Id, std::vector<std::pair<int, size_t>>> ends;  // both places each message appears
  for (int r = 0; r < P; ++r) {
    for (size_t i = 0; i < s.actions[size_t(r)].size(); ++i) {
      const Action& a = s.actions[size_t(r)][i];
      if (!is_compute(a.kind)) ends[id(r, a)].push_back({r, i});
    }
  }
  std::vector<size_t> at(size_t(P), 0);
  std::vector<std::vector<bool>> moved(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) moved[size_t(r)].assign(s.actions[size_t(r)].size(), false);
  auto run_end = [&](int r, size_t from) {  // one past the run of messages starting at `from`
    const auto& list = s.actions[size_t(r)];
    while (from < list.size() && !is_compute(list[from].kind)) ++from;
    return from;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < P; ++r) {
      const auto& list = s.actions[size_t(r)];
      while (at[size_t(r)] < list.size() && is_compute(list[at[size_t(r)]].kind)) {
        ++at[size_t(r)];
        changed = true;
      }
      if (at[size_t(r)] == list.size()) continue;
      const size_t end = run_end(r, at[size_t(r)]);
      bool all = true;
      for (size_t i = at[size_t(r)]; i < end; ++i) {
        if (moved[size_t(r)][i]) continue;
        for (const auto& [q, j] : ends[id(r, list[i])]) {
          if (q == r) continue;
          const bool there = at[size_t(q)] <= j && j < run_end(q, at[size_t(q)]);
          if (there) moved[size_t(r)][i] = moved[size_t(q)][j] = true;
        }
        all = all && moved[size_t(r)][i];
      }
      if (all) {
        at[size_t(r)] = end;
        changed = true;
      }
    }
  }
  return at;
}

}  // namespace

TEST_CASE("exchange_steps: each compute action alone, each maximal run of messages together", "[pipeline]") {
  CHECK(exchange_steps({}).empty());
  CHECK(steps_text({F(0)}) == "c0");
  CHECK(steps_text({recv_a(0)}) == "x0");
  // 1F1B rank 0 of P=2, M=2: the SEND of A1 and the RECV of G0 are one exchange.
  CHECK(steps_text({F(0), send_a(0), F(1), send_a(1), recv_g(0), B(0), recv_g(1), B(1)}) ==
        "c0 x1 c2 x3+2 c5 x6 c7");
  // Starting and ending with messages; three in a row; compute back to back.
  CHECK(steps_text({recv_a(0), F(0), send_a(0), recv_a(1), send_g(0), B(0), W(0), send_g(1)}) ==
        "x0 c1 x2+3 c5 c6 x7");
  CHECK(steps_text({send_a(0), recv_g(0), send_a(1), recv_g(1)}) == "x0+4");
  CHECK(steps_text({I(0), W(0), I(1)}) == "c0 c1 c2");

  // The fields themselves, for one list.
  const auto steps = exchange_steps({F(0), send_a(0), recv_g(0), B(0)});
  REQUIRE(steps.size() == 3);
  CHECK((!steps[0].exchange && steps[0].first == 0 && steps[0].count == 1));
  CHECK((steps[1].exchange && steps[1].first == 1 && steps[1].count == 2));
  CHECK((!steps[2].exchange && steps[2].first == 3 && steps[2].count == 1));
}

TEST_CASE("check_exchanges: every generated schedule is safe under rendezvous, P <= 8, M <= 32, V <= 4", "[pipeline]") {
  std::vector<std::string> unsafe;  // every (kind, P, M, V) that fails, then the first failure in full
  std::string first_failure;
  // Refused configurations are tested with the schedules.
  const int accepted = test::for_each_schedule(1, 8, 32, 4, [&](const Schedule& s, const test::ScheduleCase& config) {
    const ScheduleKind kind = config.kind;
    const int P = config.P, M = config.M, V = config.V;
    // The steps cover every action once, in order, and no two exchanges touch (they would be one).
    for (int r = 0; r < P; ++r) {
      const auto& list = s.actions[size_t(r)];
      size_t next = 0;
      bool previous_exchange = false;
      for (const ExchangeStep& step : exchange_steps(list)) {
        REQUIRE(step.first == next);
        REQUIRE(step.count >= 1);
        for (size_t i = step.first; i < step.first + step.count; ++i)
          REQUIRE(is_compute(list[i].kind) == !step.exchange);
        REQUIRE((step.exchange ? !previous_exchange : step.count == 1));
        previous_exchange = step.exchange;
        next += step.count;
      }
      REQUIRE(next == list.size());
    }
    try {
      check_exchanges(s);
    } catch (const ScheduleError& e) {  // a generated schedule that would hang on gloo or NCCL
      std::ostringstream name;
      name << schedule_name(kind) << " P=" << P << " M=" << M << " V=" << V;
      unsafe.push_back(name.str());
      if (first_failure.empty()) first_failure = e.what();
    }
    // The independent model agrees: every rank reaches the end of its list.
    if (P <= 4 && M <= 16) {
      const std::vector<size_t> at = brute_force_rendezvous(s);
      for (int r = 0; r < P; ++r) CHECK(at[size_t(r)] == s.actions[size_t(r)].size());
    }
  });
  REQUIRE(accepted > 1000);
  std::string list;
  for (const std::string& name : unsafe) list += "  " + name + "\n";
  INFO(unsafe.size() << " generated schedules deadlock under rendezvous semantics:\n" << list << "\nthe first one:\n"
                     << first_failure);
  CHECK(unsafe.empty());
}

TEST_CASE("check_exchanges: sends that wait for receivers in separate exchanges deadlock; simulate() cannot see it",
          "[pipeline]") {
  // Rank 0 sends A2, then computes F3, then receives G0; rank 1 sends G0, then computes B1, then
  // receives A2. With queued sends (the simulator) both go through; with sends that complete only
  // when received, rank 0 waits in its SEND of A2 for rank 1's RECV, and rank 1 in its SEND of G0
  // for rank 0's.
  const Schedule s = two_ranks(
      "crossed", 4,
      {F(0), send_a(0), F(1), send_a(1), F(2), send_a(2), F(3), send_a(3), recv_g(0), B(0), recv_g(1), B(1), recv_g(2),
       B(2), recv_g(3), B(3)},
      {recv_a(0), F(0), recv_a(1), F(1), B(0), send_g(0), B(1), send_g(1), recv_a(2), F(2), B(2), send_g(2), recv_a(3),
       F(3), B(3), send_g(3)});
  REQUIRE_NOTHROW(simulate(s));

  const ScheduleError e = exchange_error(s);
  const std::string what = e.what();
  INFO(what);
  CHECK(e.problem == "deadlock under rendezvous semantics: ranks 0 and 1 wait for each other forever");
  CHECK((e.rank == 0 && e.step == 5));
  CHECK(contains(what, "check_exchanges: schedule 'crossed' (P=2, M=4, V=1)"));
  CHECK(contains(what, "sends complete only when the peer receives"));
  // Each blocked rank, its exchange, and what it waits for.
  CHECK(contains(what, "rank 0 is blocked in the exchange at step 5; it waits for"));
  CHECK(contains(what, "SEND activation of micro-batch 2 from stage 0 to rank 1 (stage 1): rank 1 receives it in "
                       "the exchange at steps 7-8, but is blocked in the exchange at step 5"));
  CHECK(contains(what, "rank 1 is blocked in the exchange at step 5; it waits for"));
  CHECK(contains(what, "SEND gradient of micro-batch 0 from stage 1 to rank 0 (stage 0): rank 0 receives it in "
                       "the exchange at steps 7-8, but is blocked in the exchange at step 5"));
  // The grid marks both blocked exchanges.
  CHECK(grid_line(what, 5) == "   5  !sendA2>1  !sendG0>0");
  CHECK(grid_line(what, 7) == "   7   sendA3>1   sendG1>0");

  // The brute-force model agrees on where each rank gets stuck.
  CHECK(brute_force_rendezvous(s) == std::vector<size_t>{5, 5});

  // The fix Megatron uses: trade the two messages in one exchange on both sides (send A2 together
  // with the RECV of G0, and send G0 together with the RECV of A2).
  const Schedule fixed = two_ranks(
      "paired", 4,
      {F(0), send_a(0), F(1), send_a(1), F(2), F(3), send_a(2), send_a(3), recv_g(0), B(0), recv_g(1), B(1), recv_g(2),
       B(2), recv_g(3), B(3)},
      {recv_a(0), F(0), recv_a(1), F(1), B(0), send_g(0), recv_a(2), F(2), recv_a(3), B(1), send_g(1), F(3), B(2),
       send_g(2), B(3), send_g(3)});
  REQUIRE_NOTHROW(simulate(fixed));
  CHECK(brute_force_rendezvous(fixed) == std::vector<size_t>{16, 16});
  CHECK_NOTHROW(check_exchanges(fixed));
}

// Interleaved with each message next to its action (a SEND right after its producer, a RECV right
// before its consumer) — what add_communication gives every other schedule — runs with queued sends
// but waits in a cycle under rendezvous once M >= 2P: in the steady state two neighbours each send a
// gradient while the other is one forward away from receiving it. make_schedule therefore places
// interleaved's messages Megatron's way (MessagePlacement::per_iteration): one exchange per steady-state
// iteration. This test keeps both halves of that argument honest.
TEST_CASE("check_exchanges: interleaved needs the combined exchange once M >= 2P", "[pipeline]") {
  int eager_deadlocks = 0, configurations = 0;
  for (int P = 2; P <= 8; ++P) {
    for (int V = 2; V <= 4; ++V) {
      for (int M = P; M <= 32; M += P) {
        INFO("interleaved P=" << P << " M=" << M << " V=" << V);
        ++configurations;
        const Schedule eager = add_communication(interleaved_order(P, M, V));
        REQUIRE_NOTHROW(simulate(eager));  // fine with queued sends
        bool eager_safe = true;
        try {
          check_exchanges(eager);
        } catch (const ScheduleError& e) {
          eager_safe = false;
          CHECK(contains(e.problem, "deadlock under rendezvous semantics"));
        }
        CHECK(eager_safe == (M < 2 * P));
        eager_deadlocks += eager_safe ? 0 : 1;

        const Schedule combined = make_schedule(ScheduleKind::interleaved, P, M, V);
        CHECK_NOTHROW(check_exchanges(combined));
        // Same compute order; only the messages moved.
        for (int r = 0; r < P; ++r) {
          std::vector<Action> a, b;
          for (const Action& x : eager.actions[size_t(r)]) if (is_compute(x.kind)) a.push_back(x);
          for (const Action& x : combined.actions[size_t(r)]) if (is_compute(x.kind)) b.push_back(x);
          CHECK(a == b);
        }
        if (P <= 4 && M <= 12) {  // the brute-force model agrees on both
          const std::vector<size_t> stuck = brute_force_rendezvous(eager);
          bool all_done = true;
          for (int r = 0; r < P; ++r) all_done = all_done && stuck[size_t(r)] == eager.actions[size_t(r)].size();
          CHECK(all_done == eager_safe);
        }
      }
    }
  }
  CHECK(configurations == 159);
  CHECK(eager_deadlocks == 138);
}

TEST_CASE("check_exchanges: zb-v needs lock-step exchanges; next to their actions its messages deadlock",
          "[pipeline]") {
  // In the V, neighbouring ranks send to each other both ways (chunk 0's activations go down the
  // ranks, chunk 1's come back up), so a rank's SEND right after its F can meet its neighbour's
  // SEND right after its own F. Lock-step exchanges pair every slot's messages on both ends.
  int eager_deadlocks = 0, configurations = 0;
  for (int P = 2; P <= 8; ++P) {
    for (int M = 1; M <= 32; ++M) {
      INFO("zb-v P=" << P << " M=" << M);
      ++configurations;
      const Schedule order = zb_v_order(P, M);
      const Schedule eager = add_communication(order, MessagePlacement::next_to_actions);
      REQUIRE_NOTHROW(simulate(eager));  // fine with queued sends
      try {
        check_exchanges(eager);
      } catch (const ScheduleError& e) {
        ++eager_deadlocks;
        CHECK(contains(e.problem, "deadlock under rendezvous semantics"));
      }
      const Schedule lock_step = make_schedule(ScheduleKind::zb_v, P, M);
      CHECK_NOTHROW(check_exchanges(lock_step));
      for (int r = 0; r < P; ++r) {  // same compute order; only the messages moved
        std::vector<Action> a;
        for (const Action& x : lock_step.actions[size_t(r)]) if (is_compute(x.kind)) a.push_back(x);
        CHECK(a == order.actions[size_t(r)]);
      }
      if (P <= 4 && M <= 12) {
        const std::vector<size_t> at = brute_force_rendezvous(lock_step);
        for (int r = 0; r < P; ++r) CHECK(at[size_t(r)] == lock_step.actions[size_t(r)].size());
      }
    }
  }
  CHECK(configurations == 224);
  CHECK(eager_deadlocks == 217);
}

TEST_CASE("add_communication, lock_step: the messages of each time in one exchange", "[pipeline]") {
  // 1F1B on P=2, M=2, F one unit and B two: rank 0 runs F0 F1 at 0-1, 1-2 and B0 B1 at 4-6, 7-9;
  // rank 1 runs F0 at 1-2, B0 at 2-4, F1 at 4-5, B1 at 5-7. Rank 1 receives A1 at time 2 (when rank
  // 0 made it), before its B0 — next_to_actions would wait until just before F1 — and rank 0
  // receives G0 at 4, G1 at 7.
  const Schedule s = add_communication(one_f_one_b_order(2, 2), MessagePlacement::lock_step);
  CHECK(unit_slots(one_f_one_b_order(2, 2)) ==
        std::vector<std::vector<Slot>>{{{0, 1}, {1, 2}, {4, 6}, {7, 9}}, {{1, 2}, {2, 4}, {4, 5}, {5, 7}}});
  auto names = [&](int r) {
    std::string out;
    for (const Action& a : s.actions[size_t(r)]) {
      if (!out.empty()) out += ' ';
      out += short_name(a, r, s.layout);
    }
    return out;
  };
  CHECK(names(0) == "F0 sendA0>1 F1 sendA1>1 recvG0<1 B0 recvG1<1 B1");
  CHECK(names(1) == "recvA0<0 F0 recvA1<0 B0 sendG0>0 F1 B1 sendG1>0");
  // An order that cannot finish is refused, naming each stuck rank and what it waits for.
  Schedule cycle = one_f_one_b_order(2, 2);
  std::swap(cycle.actions[1][0], cycle.actions[1][1]);  // rank 1: B0 before F0
  const std::string why = test::error_of([&] { add_communication(cycle, MessagePlacement::lock_step); });
  CHECK(contains(why, "schedule '1f1b' (P=2, M=2, V=1) can never finish"));
  CHECK(contains(why, "rank 1, step 0: B(micro-batch 0) waits for F of micro-batch 0 on stage 1 (rank 1)"));
  CHECK(contains(why, "rank 0, step 2: B(micro-batch 0) waits for B or I of micro-batch 0 on stage 1 (rank 1)"));
}

TEST_CASE("add_communication, per_iteration: one exchange per steady-state iteration, Megatron's order", "[pipeline]") {
  // P=2, V=2, M=4, rank 1 (warm-up of (V-1)P = 2 forwards). Between two iterations (F, B) there is
  // exactly one run of messages: the sends of the iteration before, then the receives of the next.
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 4, 2);
  std::vector<std::string> names;
  for (const Action& a : s.actions[1]) names.push_back(short_name(a, 1, s.layout));
  const std::vector<std::string> expected = {
      "recvA0.0<0", "F0.0", "sendA0.0>0", "recvA1.0<0", "F1.0",                              // warm-up
      "sendA1.0>0", "recvA0.1<0", "F0.1", "B0.1",                                           // F, B
      "sendG0.1>0", "recvA1.1<0", "F1.1", "B1.1",                                           //
      "sendG1.1>0", "recvA2.0<0", "recvG0.0<0", "F2.0", "B0.0",                             //
      "sendA2.0>0", "sendG0.0>0", "recvA3.0<0", "recvG1.0<0", "F3.0", "B1.0",               //
      "sendA3.0>0", "sendG1.0>0", "recvA2.1<0", "F2.1", "B2.1",                             //
      "sendG2.1>0", "recvA3.1<0", "F3.1", "B3.1",                                           //
      "sendG3.1>0", "recvG2.0<0", "B2.0", "sendG2.0>0", "recvG3.0<0", "B3.0", "sendG3.0>0"  // cool-down
  };
  CHECK(names == expected);
  // A list that already has messages is refused.
  REQUIRE_THROWS_WITH(add_communication(s, MessagePlacement::per_iteration), Catch::Matchers::Contains("already has messages"));
}

TEST_CASE("check_exchanges: agrees with a brute-force model on schedules with one SEND delayed", "[pipeline]") {
  // Delaying a SEND keeps every dependency (the tensor exists earlier) and is harmless to queued
  // sends, but can pull it out of the exchange its receiver is in. Only variants the simulator
  // accepts are kept: check_exchanges assumes that much.
  int safe = 0, deadlocks = 0;
  for (ScheduleKind kind : all_schedule_kinds()) {
    for (int P = 2; P <= 4; ++P) {
      for (int M = 1; M <= 6; ++M) {
        const int V = default_chunks(kind);
        if (kind == ScheduleKind::interleaved && M % P != 0) continue;
        if (kind == ScheduleKind::dualpipev && M < 2 * P) continue;
        // Interleaved twice: as generated, and with its messages next to their actions (the
        // placement that deadlocks once M >= 2P, see above).
        std::vector<Schedule> bases = {make_schedule(kind, P, M, V)};
        if (kind == ScheduleKind::interleaved) bases.push_back(add_communication(interleaved_order(P, M, V)));
        for (const Schedule& base : bases)
        for (int r = 0; r < P; ++r) {
          for (size_t i = 0; i < base.actions[size_t(r)].size(); ++i) {
            if (!is_send(base.actions[size_t(r)][i].kind)) continue;
            for (size_t delay : {1, 2, 3}) {
              Schedule s = base;
              auto& list = s.actions[size_t(r)];
              if (i + delay >= list.size()) break;
              const Action moving = list[i];
              list.erase(list.begin() + std::ptrdiff_t(i));
              list.insert(list.begin() + std::ptrdiff_t(i + delay), moving);
              try {
                simulate(s);
              } catch (const ScheduleError&) {
                continue;
              }
              INFO(schedule_name(kind) << " P=" << P << " M=" << M << ": rank " << r << "'s action " << i
                                       << " delayed by " << delay);
              const std::vector<size_t> stuck = brute_force_rendezvous(s);
              int first_stuck = -1;
              for (int q = P - 1; q >= 0; --q) {
                if (stuck[size_t(q)] < s.actions[size_t(q)].size()) first_stuck = q;
              }
              if (first_stuck < 0) {
                ++safe;
                CHECK_NOTHROW(check_exchanges(s));
              } else {
                ++deadlocks;
                const ScheduleError e = exchange_error(s);
                CHECK(contains(e.problem, "deadlock under rendezvous semantics"));
                CHECK(e.rank == first_stuck);
                CHECK(e.step == int(stuck[size_t(first_stuck)]));
                for (int q = 0; q < P; ++q) {
                  if (stuck[size_t(q)] < s.actions[size_t(q)].size())
                    CHECK(contains(e.what(), "rank " + std::to_string(q) + " is blocked in " +
                                                 exchange_at(s.actions[size_t(q)], stuck[size_t(q)])));
                }
              }
            }
          }
        }
      }
    }
  }
  // Both outcomes occur, or the comparison proves little.
  CHECK(safe > 100);
  CHECK(deadlocks > 100);
}

TEST_CASE("check_exchanges: a RECV matched with the wrong micro-batch, and messages without a partner", "[pipeline]") {
  const Schedule good = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
  REQUIRE(short_name(good.actions[1][0], 1, good.layout) == "recvA0<0");
  REQUIRE(short_name(good.actions[1][4], 1, good.layout) == "recvA1<0");
  REQUIRE_NOTHROW(check_exchanges(good));

  SECTION("micro-batches swapped on the receiving side") {
    Schedule s = good;
    s.actions[1][0].microbatch = 1;
    s.actions[1][4].microbatch = 0;
    const ScheduleError e = exchange_error(s);
    const std::string what = e.what();
    INFO(what);
    CHECK((e.rank == 1 && e.step == 0));
    CHECK(contains(e.problem, "message mismatch"));
    // Both actions are named: the RECV in the headline, the SEND it would meet in the problem.
    CHECK(contains(what, "fails at rank 1, step 0, RECV activation of micro-batch 1 for stage 1 from rank 0 "
                         "(stage 0)"));
    CHECK(contains(e.problem, "SEND activation of micro-batch 0 from stage 0 to rank 1 (stage 1) (rank 0, step 1)"));
    CHECK(grid_line(what, 0) == "   0   F0        !recvA1<0");
    CHECK(grid_line(what, 1) == "   1  !sendA0>1   F0");
  }
  SECTION("a RECV dropped: its SEND would wait forever") {
    Schedule s = good;
    s.actions[1].erase(s.actions[1].begin() + 4);  // recvA1<0
    const ScheduleError e = exchange_error(s);
    CHECK((e.rank == 0 && e.step == 3));
    CHECK(contains(e.problem, "SEND without a matching RECV: rank 1 never receives this message"));
  }
  SECTION("the last SEND dropped") {
    Schedule s = good;
    s.actions[1].pop_back();  // sendG1>0
    const ScheduleError e = exchange_error(s);
    CHECK((e.rank == 0 && e.step == 6));
    CHECK(contains(e.problem, "RECV without a matching SEND: rank 1 never sends this message"));
  }
  SECTION("a message that leaves the pipeline") {
    Schedule s = good;
    s.actions[0].push_back(recv_a(0));
    const ScheduleError e = exchange_error(s);
    CHECK((e.rank == 0 && e.step == 8));
    CHECK(contains(e.problem, "leave the pipeline"));
  }
}

TEST_CASE("check_exchanges_headers_first: NCCL runs every schedule gloo runs", "[pipeline]") {
  // Every schedule check_exchanges accepts, P <= 6, M <= 16, fixed and varying shapes, with every
  // host reading its received data at once. Gradients carry no header (comm::Shapes::preset);
  // activation headers travel on a communicator and stream of their own; an exchange's sends go out
  // before its host waits for any header, as a gloo rank's do, on one data communicator per
  // direction. zb-v with M < 2P hung when the sends waited for the headers.
  const int total = test::for_each_schedule(2, 6, 16, 3, [&](const Schedule& s, const test::ScheduleCase&) {
    CHECK_NOTHROW(check_exchanges_headers_first(s, false));
    CHECK_NOTHROW(check_exchanges_headers_first(s, true));
  });
  REQUIRE(total > 300);
}

TEST_CASE("check_exchanges_headers_first: data queued behind data that never moves is found", "[pipeline]") {
  // Rank 0 receives G0 and then sends A0; rank 1 receives A0 and then sends G0. A0's header travels
  // apart and arrives, but rank 0 waits for G0 before it sends A0 (its host may read G0 at once,
  // and its data stream runs the receive first anyway), and rank 1 waits for A0 before it sends G0.
  const Schedule s = two_ranks("crossed", 1, {recv_g(0), F(0), send_a(0), B(0)},
                               {recv_a(0), F(0), B(0), send_g(0)});
  for (bool varying : {false, true}) {
    const ScheduleError e = [&] {
      try {
        check_exchanges_headers_first(s, varying);
      } catch (const ScheduleError& err) {
        return err;
      }
      FAIL("a crossed pair of exchanges passed");
      throw;
    }();
    CHECK(e.problem.rfind("on NCCL, ranks 0 1 would wait for each other", 0) == 0);
    CHECK((e.rank == 0 && e.step == 0));
    CHECK(contains(e.what(), "! marks the exchange each stuck rank waits in"));
  }
  // In order, the same messages pass.
  CHECK_NOTHROW(check_exchanges_headers_first(
      two_ranks("in order", 1, {F(0), send_a(0), recv_g(0), B(0)}, {recv_a(0), F(0), B(0), send_g(0)}), true));
}

// The V with one micro-batch that hung on the emulated NCCL, reduced to two ranks: rank 0 holds
// stages 0 and 3, rank 1 stages 1 and 2. Rank 0 sends A0 to stage 1 in the same exchange as it
// receives A0 from stage 2, a receive whose header rank 1 sends only after it has run stage 1 — on
// data its host may read (the embedding checks received ids there). Rank 0's send must go out
// before it waits for that header, as the transport now does.
TEST_CASE("check_exchanges_headers_first: a send does not wait for the exchange's incoming headers", "[pipeline]") {
  Schedule s;
  s.name = "v with one micro-batch";
  s.layout = Layout{2, 2, Placement::v_shape};
  s.microbatches = 1;
  s.actions = {{F(0, 0), send_a(0, 0), recv_a(0, 1), F(0, 1), B(0, 1), send_g(0, 1), recv_g(0, 0), B(0, 0)},
               {recv_a(0, 0), F(0, 0), F(0, 1), send_a(0, 1), recv_g(0, 1), B(0, 1), B(0, 0), send_g(0, 0)}};
  REQUIRE_NOTHROW(check_exchanges(s));
  for (bool varying : {false, true}) CHECK_NOTHROW(check_exchanges_headers_first(s, varying));
}

// NCCL pairs the k-th send on a link with the k-th receive, whatever each carries. Two messages to
// the same neighbour at one time — a DualPipeV pair's activation and gradient — must be listed in the
// same order at both ends, or one lands in the other's buffer with no error (found by review: this
// valid file did exactly that before lock-step ordered same-time messages by what they carry).
TEST_CASE("check_exchanges_headers_first: both ends list a link's messages in one order", "[pipeline]") {
  const ScheduleFile file = parse_schedule_csv(
      "0F0,3F0,(0F1;3B0)OVERLAP_F_B,3F1,3B1,0B0,0B1\r\n1F0,2F0,2B0,1F1,2F1,1B0,2B1,1B1\r\n", "pair.csv");
  for (bool varying : {false, true}) CHECK_NOTHROW(check_exchanges_headers_first(schedule_from_file(file), varying));
  // Rank 1 receives A1 before A0 while rank 0 sends A0 first: on NCCL, A0's bytes would fill A1's buffer.
  const Schedule swapped =
      two_ranks("swapped", 2, {F(0), send_a(0), F(1), send_a(1), recv_g(0), B(0), recv_g(1), B(1)},
                {recv_a(1), recv_a(0), F(0), F(1), B(0), send_g(0), B(1), send_g(1)});
  try {
    check_exchanges_headers_first(swapped, false);
    FAIL("a link whose two ends disagree on the order passed");
  } catch (const ScheduleError& e) {
    CHECK(contains(e.problem, "message 1 from rank 0 to rank 1"));
    CHECK(contains(e.problem, "NCCL matches a link's messages by order"));
    CHECK((e.rank == 0 && e.step == 1));
  }
}

namespace {

// A transport of any name with the given capabilities (it moves nothing): check_exchanges_for
// must go by what a transport does, not by what it is called.
class Capabilities final : public comm::Communicator {
 public:
  Capabilities(const std::string& name, bool queues_sends, bool in_order)
      : Communicator(name, 0, 2, Device::cpu(), std::chrono::seconds(1)), queues_(queues_sends), in_order_(in_order) {}
  bool queues_sends() const override { return queues_; }
  bool matches_messages_in_order() const override { return in_order_; }

 protected:
  void run_exchange(std::vector<Transfer>&, const comm::Deadline&) override { fail("moves nothing"); }
  void run_all_reduce(const Tensor&, comm::ReduceOp, const comm::Deadline&) override { fail("moves nothing"); }
  void run_broadcast(const Tensor&, int, const comm::Deadline&) override { fail("moves nothing"); }
  void run_barrier(const comm::Deadline&) override { fail("moves nothing"); }
  std::unique_ptr<comm::Communicator> run_split(int, int, const std::vector<int>&, const comm::Deadline&) override {
    fail("moves nothing");
  }
  void abort_transport(const std::string&) override {}

 private:
  bool queues_, in_order_;
};

}  // namespace

TEST_CASE("check_exchanges_for: the checks a transport needs follow its capabilities, not its name", "[pipeline]") {
  // Crossed: each rank receives before it sends what the other waits for.
  const Schedule crossed = two_ranks("crossed", 1, {recv_g(0), F(0), send_a(0), B(0)},
                                     {recv_a(0), F(0), B(0), send_g(0)});
  CHECK_NOTHROW(check_exchanges_for(Capabilities("nccl", true, false), crossed, true));  // the name alone: nothing
  try {
    check_exchanges_for(Capabilities("local", true, true), crossed, true);
    FAIL("a transport that pairs messages by order ran a crossed schedule unchecked");
  } catch (const ScheduleError& e) {
    CHECK(e.problem.rfind("on NCCL, ranks 0 1 would wait for each other", 0) == 0);
  }
  CHECK_THROWS_AS(check_exchanges_for(Capabilities("local", false, false), crossed, true), ScheduleError);
}
