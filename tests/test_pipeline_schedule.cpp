// Pipeline schedules as data and the dry-run simulator: every schedule over a grid of (P, M, V) runs
// without deadlock or dependency violation and does each piece of work exactly once; the textbook
// bubbles and activation peaks come out exactly; broken schedules are caught and the printed grid
// marks the culprit; the terminal chart, the SVG and `brigade simulate`.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "core/error.h"
#include "tools/simulate/command.h"
#include "pipeline/analysis/grid.h"
#include "pipeline/schedule.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/analysis/timeline.h"
#include "cli_run.h"
#include "every_schedule.h"
#include "test_util.h"

using namespace brigade;
using namespace brigade::pipeline;
using test::error_of;
using test::grid_line;

namespace {

// Runs `schedule` expecting the simulator to reject it; returns the error.
ScheduleError rejection(const Schedule& schedule, const Costs& costs = {}) {
  try {
    simulate(schedule, costs);
  } catch (const ScheduleError& e) {
    return e;
  }
  FAIL("the simulator accepted a broken schedule");
  throw;  // unreachable
}


Costs unit_fb() {  // F = B = 1: W folded into B costs nothing extra
  Costs c;
  c.weight = 0;
  return c;
}

// Which (kind, micro-batch, stage) each rank computes, counted straight from the action lists.
std::map<std::tuple<ActionKind, int, int>, int> compute_counts(const Schedule& s) {
  std::map<std::tuple<ActionKind, int, int>, int> counts;
  for (int r = 0; r < s.ranks(); ++r) {
    for (const Action& a : s.actions[size_t(r)]) {
      if (is_compute(a.kind)) ++counts[{a.kind, a.microbatch, s.layout.stage(r, a.chunk)}];
    }
  }
  return counts;
}

// Rank r's actions, short names separated by spaces ("F0.0 F1.0 I0.1 ...").
std::string names(const Schedule& s, int r) {
  std::string out;
  for (const Action& a : s.actions[size_t(r)]) {
    if (!out.empty()) out += ' ';
    out += short_name(a, r, s.layout);
  }
  return out;
}

}  // namespace

TEST_CASE("schedule: every schedule runs every accepted (P, M, V) up to 8 x 32 x 4, each piece of work once",
          "[pipeline]") {
  auto refused = [](const test::ScheduleCase& config, const Error& e) {
    const ScheduleKind kind = config.kind;
    const int P = config.P, M = config.M, V = config.V;
    // Refusals are exactly the documented ones, and the message names the configuration.
    const bool expected = kind == ScheduleKind::interleaved ? (V == 1 || M % P != 0)
                          : kind == ScheduleKind::zb_v      ? V != 2
                          : kind == ScheduleKind::dualpipev ? V != 2 || M < 2 * P
                                                            : V > 1;
    INFO(schedule_name(kind) << " P=" << P << " M=" << M << " V=" << V << ": " << e.what());
    REQUIRE(expected);
    REQUIRE(std::string(e.what()).find("V=" + std::to_string(V)) != std::string::npos);
    REQUIRE(std::string(e.what()).find("P=" + std::to_string(P)) != std::string::npos);
    REQUIRE(std::string(e.what()).find("M=" + std::to_string(M)) != std::string::npos);
  };
  const int accepted = test::for_each_schedule(1, 8, 32, 4, [&](const Schedule& s, const test::ScheduleCase& config) {
    const ScheduleKind kind = config.kind;
    const int P = config.P, M = config.M, V = config.V;
    REQUIRE(s.ranks() == P);
    REQUIRE(s.chunks() == V);
    // Exactly one F, and one B or one I + one W, per micro-batch per global stage.
    const auto counts = compute_counts(s);
    const bool split = kind == ScheduleKind::zb_h1 || kind == ScheduleKind::zb_v;
    const bool mixed = kind == ScheduleKind::dualpipev;  // whole B for most, I + W for some
    for (int stage = 0; stage < P * V; ++stage) {
      for (int m = 0; m < M; ++m) {
        auto count = [&](ActionKind k) {
          auto it = counts.find({k, m, stage});
          return it == counts.end() ? 0 : it->second;
        };
        REQUIRE(count(ActionKind::forward) == 1);
        if (mixed) {  // either, once
          REQUIRE(count(ActionKind::backward) + count(ActionKind::backward_input) == 1);
          REQUIRE(count(ActionKind::backward_weight) == count(ActionKind::backward_input));
          continue;
        }
        REQUIRE(count(ActionKind::backward) == (split ? 0 : 1));
        REQUIRE(count(ActionKind::backward_input) == (split ? 1 : 0));
        REQUIRE(count(ActionKind::backward_weight) == (split ? 1 : 0));
      }
    }
    // The dry run finds no deadlock and no violation, with any costs.
    for (const Costs& c : {Costs{}, unit_fb(), Costs{2, 1, 3, 0.5, {}}}) {
      SimulationResult r;
      REQUIRE_NOTHROW(r = simulate(s, c));
      REQUIRE(r.bubble_fraction >= -1e-12);
      REQUIRE(r.bubble_fraction < 1);
      REQUIRE(r.timeline.size() == size_t(P));
      for (int rank = 0; rank < P; ++rank)
        REQUIRE(r.timeline[size_t(rank)].size() == s.actions[size_t(rank)].size());
    }
  }, refused);
  REQUIRE(accepted > 1000);
}

TEST_CASE("schedule: refused configurations say why, naming P, M and V", "[pipeline]") {
  auto msg = [](ScheduleKind k, int P, int M, int V) { return error_of([&] { make_schedule(k, P, M, V); }); };
  CHECK(msg(ScheduleKind::interleaved, 4, 6, 2).find("multiple") != std::string::npos);
  CHECK(msg(ScheduleKind::interleaved, 4, 6, 2).find("P=4, M=6, V=2") != std::string::npos);
  CHECK(msg(ScheduleKind::interleaved, 4, 8, 1).find("at least 2 chunks") != std::string::npos);
  CHECK(msg(ScheduleKind::one_f_one_b, 4, 8, 2).find("one chunk per rank, got V=2") != std::string::npos);
  CHECK(msg(ScheduleKind::gpipe, 0, 8, 1).find("P=0, M=8, V=1") != std::string::npos);
  CHECK(msg(ScheduleKind::zb_h1, 4, 0, 1).find("P=4, M=0, V=1") != std::string::npos);
  CHECK(msg(ScheduleKind::naive, 1 << 20, 1 << 20, 1).find("too large") != std::string::npos);
  CHECK(error_of([] { parse_schedule_kind("2f2b"); }).find("unknown schedule '2f2b'") != std::string::npos);
  for (ScheduleKind k : all_schedule_kinds()) CHECK(parse_schedule_kind(schedule_name(k)) == k);
}

TEST_CASE("schedule: the orders themselves, for a small case", "[pipeline]") {
  // 1F1B, P=3, M=4: rank r warms up with P - r - 1 forwards.
  const Schedule s = one_f_one_b_order(3, 4);
  CHECK(names(s, 0) == "F0 F1 F2 B0 F3 B1 B2 B3");
  CHECK(names(s, 1) == "F0 F1 B0 F2 B1 F3 B2 B3");
  CHECK(names(s, 2) == "F0 B0 F1 B1 F2 B2 F3 B3");
  // With messages: a RECV right before the consumer, a SEND right after the producer.
  const Schedule c = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
  CHECK(names(c, 0) == "F0 sendA0>1 F1 sendA1>1 recvG0<1 B0 recvG1<1 B1");
  CHECK(names(c, 1) == "recvA0<0 F0 B0 sendG0>0 recvA1<0 F1 B1 sendG1>0");
  // ZB-H1, P=2, M=3: rank r holds back its last r weight gradients.
  const Schedule z = zb_h1_order(2, 3);
  CHECK(names(z, 0) == "F0 F1 I0 W0 F2 I1 W1 I2 W2");
  CHECK(names(z, 1) == "F0 I0 F1 I1 W0 F2 I2 W1 W2");
  // GPipe and naive.
  CHECK(names(gpipe_order(2, 3), 1) == "F0 F1 F2 B0 B1 B2");
  CHECK(names(naive_order(2, 2), 0) == "F0 B0 F1 B1");
  // One rank holding every stage hands tensors over without messages.
  const Schedule one = make_schedule(ScheduleKind::interleaved, 1, 2, 3);
  CHECK(names(one, 0) == "F0.0 F0.1 F0.2 B0.2 F1.0 B0.1 F1.1 B0.0 F1.2 B1.2 B1.1 B1.0");
  CHECK(simulate(one).messages() == 0);
  CHECK(error_of([&] { add_communication(c); }).find("already has messages") != std::string::npos);
}

TEST_CASE("simulate: gpipe and 1f1b with unit costs have bubble (P-1)/(M+P-1), naive (P-1)/P", "[pipeline]") {
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 32; ++M) {
      INFO("P=" << P << " M=" << M);
      for (const Costs& c : {unit_fb(), Costs{}}) {  // F = B = 1, and B = 1 + W = 1 (same shape, scaled)
        const double textbook = (P - 1.0) / (M + P - 1);
        CHECK(simulate(make_schedule(ScheduleKind::gpipe, P, M), c).bubble_fraction == Approx(textbook).margin(1e-12));
        const SimulationResult r = simulate(make_schedule(ScheduleKind::one_f_one_b, P, M), c);
        CHECK(r.bubble_fraction == Approx(textbook).margin(1e-12));
        CHECK(r.bubble_ratio == Approx((P - 1.0) / M).margin(1e-12));
        CHECK(simulate(make_schedule(ScheduleKind::naive, P, M), c).bubble_fraction ==
              Approx((P - 1.0) / P).margin(1e-12));
      }
    }
  }
  // The CLI's example: P=4, M=16 -> 3/19 = 0.1579; makespan (M+P-1)(F+B) = 38.
  const SimulationResult r = simulate(make_schedule(ScheduleKind::one_f_one_b, 4, 16), unit_fb());
  CHECK(r.makespan == 38);
  CHECK(r.bubble_fraction == Approx(3.0 / 19).margin(1e-15));
}

TEST_CASE("simulate: interleaved with F = B = 1 has bubble (P-1)/(V*M+P-1), checked by hand for P=2 M=4 V=2",
          "[pipeline]") {
  // Stages 0 and 2 live on rank 0, 1 and 3 on rank 1; every action takes 1 unit. Rank 0 runs
  //   F0.0 F1.0 F0.1 F1.1 | F2.0 B0.1 | F3.0 B1.1 | F2.1 B0.0 | F3.1 B1.0 | B2.1 | B3.1 | B2.0 | B3.0
  // (| marks the exchanges between iterations: M = 2P, so an F and the B after it trade their
  // messages together). F2.0 shares its exchange with the RECV of G0.1, which rank 1 sends after its
  // B0.1 at t = 4..5: rank 0 idles at t = 4. B3.1 waits for rank 1's B3.1 (t = 14..15): idle at 14.
  // Rank 1 starts at t=1 (it needs F0.0 from rank 0) and ends at 17 (B3.0 at 16..17): 2 idle units.
  // Makespan 18; busy 16 per rank; bubble 4/36 = 1/9 = (P-1)/(V*M+P-1).
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 4, 2);
  const SimulationResult r = simulate(s, unit_fb());
  CHECK(r.makespan == 18);
  CHECK(r.busy == std::vector<double>{16, 16});
  CHECK(r.bubble_fraction == Approx(1.0 / 9).margin(1e-15));
  const std::string chart = timeline_text(s, r);
  CHECK(chart.find("rank 0  FFFF.FBFBFBFBB.BBB\n"
                   "        0101 203120312 323\n"
                   "        0011 010110101 100\n"
                   "rank 1  .FFFBFBFBFBFBFBBB.\n"
                   "         0100112031223323\n"
                   "         0011110000111100\n") != std::string::npos);
  // Rank 0 stashes 5 micro-batch-chunks at its peak: 4 warm-up forwards and one more.
  CHECK(r.peak_activations_per_rank == std::vector<int>{5, 3});
  CHECK(r.peak_activations == std::vector<int>{4, 3, 2, 1});

  for (int P = 1; P <= 8; ++P) {
    for (int V = 2; V <= 4; ++V) {
      for (int M = P; M <= 32; M += P) {
        INFO("P=" << P << " M=" << M << " V=" << V);
        const SimulationResult ri = simulate(make_schedule(ScheduleKind::interleaved, P, M, V), unit_fb());
        CHECK(ri.bubble_fraction == Approx((P - 1.0) / (V * M + P - 1)).margin(1e-12));
      }
    }
  }
}

TEST_CASE("simulate: zb-h1 with F = I = W = 1 has a third of 1f1b's idle time, at 1f1b's peak memory", "[pipeline]") {
  for (int P = 2; P <= 8; ++P) {
    for (int M = P; M <= 32; ++M) {
      INFO("P=" << P << " M=" << M);
      const SimulationResult zb = simulate(make_schedule(ScheduleKind::zb_h1, P, M));
      const SimulationResult ofob = simulate(make_schedule(ScheduleKind::one_f_one_b, P, M));
      // Each rank computes 3M units either way; 1F1B idles 3(P-1) per rank, ZB-H1 P-1.
      const double zb_idle = P * zb.makespan - 3.0 * M * P;
      const double ofob_idle = P * ofob.makespan - 3.0 * M * P;
      CHECK(ofob_idle == Approx(3.0 * (P - 1) * P));
      CHECK(zb_idle == Approx(ofob_idle / 3));
      CHECK(zb.bubble_fraction == Approx((P - 1.0) / (3 * M + P - 1)).margin(1e-12));
      CHECK(zb.bubble_fraction < 0.5 * ofob.bubble_fraction);
      // Stashes live until W, so every rank may hold P micro-batches — rank 0's peak under 1F1B.
      CHECK(*std::max_element(zb.peak_activations.begin(), zb.peak_activations.end()) ==
            *std::max_element(ofob.peak_activations.begin(), ofob.peak_activations.end()));
    }
  }
}

TEST_CASE("layout: the V places chunk 0 down the ranks and chunk 1 back up; every placement inverts", "[pipeline]") {
  const Layout v{4, 2, Placement::v_shape};
  CHECK(v.stage(0, 0) == 0);
  CHECK(v.stage(3, 0) == 3);
  CHECK(v.stage(3, 1) == 4);  // the turn: stages 3 and 4 on rank 3
  CHECK(v.stage(0, 1) == 7);  // the two ends of the model on rank 0
  const Layout i{4, 2};
  CHECK(i.stage(0, 1) == 4);
  CHECK(i.rank_of(7) == 3);
  for (Placement placement : {Placement::interleaved, Placement::v_shape})
    for (int P = 1; P <= 5; ++P)
      for (int V = 1; V <= 4; ++V) {
        const Layout l{P, V, placement};
        std::vector<int> seen(size_t(P * V), 0);
        for (int r = 0; r < P; ++r)
          for (int c = 0; c < V; ++c) {
            const int s = l.stage(r, c);
            REQUIRE(s >= 0);
            REQUIRE(s < P * V);
            ++seen[size_t(s)];
            REQUIRE(l.rank_of(s) == r);
            REQUIRE(l.chunk_of(s) == c);
          }
        for (int n : seen) REQUIRE(n == 1);
      }
  // Messages name the rank on the other end through the placement: rank 2's chunk 1 (stage 5) sends
  // its activation up to stage 6, on rank 1.
  CHECK(short_name(Action{ActionKind::send_activation, 3, 1}, 2, v) == "sendA3.1>1");
  CHECK(v.peer_stage(Action{ActionKind::send_activation, 3, 1}, 2) == 6);
  CHECK(v.peer_stage(Action{ActionKind::recv_gradient, 0, 0}, 3) == 4);  // same rank: no message is made for it
}

TEST_CASE("schedule: zb-v's order for P=2, M=4, and its turn without a message", "[pipeline]") {
  // Rank 0 holds stages 0 and 3, rank 1 stages 1 and 2. Rank 0: 3 forwards of chunk 0, then two
  // F1 I1 W1 as the first micro-batches come back up, the steady F0 I0 W0 F1 I1 W1, the cool-down.
  const Schedule z = zb_v_order(2, 4);
  CHECK(z.layout == Layout{2, 2, Placement::v_shape});
  CHECK(names(z, 0) == "F0.0 F1.0 F2.0 F0.1 I0.1 W0.1 F1.1 I1.1 W1.1 F3.0 I0.0 W0.0 F2.1 I2.1 W2.1 I1.0 W1.0 "
                       "F3.1 I3.1 W3.1 I2.0 W2.0 I3.0 W3.0");
  // Rank 1 holds the turn: its warm-up is one F0, then F1 F0, then one F1 I1 W1.
  CHECK(names(z, 1) == "F0.0 F0.1 F1.0 F1.1 I0.1 W0.1 F2.0 I0.0 W0.0 F2.1 I1.1 W1.1 F3.0 I1.0 W1.0 F3.1 I2.1 "
                       "W2.1 I2.0 I3.1 I3.0 W2.0 W3.1 W3.0");
  // With messages: rank 1 turns every micro-batch round (stage 1 to stage 2 and back) without a
  // message, and a micro-batch crosses 2P - 2 = 2 rank boundaries each way.
  const Schedule c = make_schedule(ScheduleKind::zb_v, 2, 4);
  for (const Action& a : c.actions[1]) {
    INFO(short_name(a, 1, c.layout));
    const bool up_the_turn = (a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_gradient) && a.chunk == 0;
    const bool down_the_turn = (a.kind == ActionKind::recv_activation || a.kind == ActionKind::send_gradient) && a.chunk == 1;
    CHECK(!up_the_turn);
    CHECK(!down_the_turn);
  }
  CHECK(simulate(c).messages() == 4 * 2 * 2);
  // One rank: both arms on it, no messages at all.
  CHECK(simulate(make_schedule(ScheduleKind::zb_v, 1, 3, 2)).messages() == 0);
}

TEST_CASE("simulate: zb-v with F = I = W = 1 and M >= 2P idles only in the warm-up and cool-down, at 1f1b's memory",
          "[pipeline]") {
  // The bound: every rank computes 2 chunks x M x (F + I + W) = 6M units, and rank r cannot start
  // before time r (its first F, on stage r, needs the forwards of stages 0..r-1 one after another)
  // nor end before the makespan minus its work. So the makespan is at least 6M + P - 1, and the
  // bubble at least P(P-1) / (P(6M + P - 1)) = (P-1)/(6M+P-1). ZB-V meets it (the paper's "zero
  // bubble" with T_F = T_B = T_W): rank r idles r units before its first action, P-1-r after its
  // last, and never in between.
  for (int P = 1; P <= 8; ++P) {
    for (int M = 2 * P; M <= 32; ++M) {
      INFO("P=" << P << " M=" << M);
      const SimulationResult zb = simulate(make_schedule(ScheduleKind::zb_v, P, M, 2));
      REQUIRE(zb.makespan == 6.0 * M + P - 1);
      REQUIRE(zb.bubble_fraction == Approx((P - 1.0) / (6 * M + P - 1)).margin(1e-12));
      for (int r = 0; r < P; ++r) {
        INFO("rank " << r);
        double end = r;  // the first compute action starts at r, each next one where the last ended
        for (const TimedAction& t : zb.timeline[size_t(r)]) {
          if (!is_compute(t.action.kind)) continue;
          REQUIRE(t.start == end);
          end = t.end;
        }
        REQUIRE(end == 6.0 * M + r);
      }
      // Memory: a chunk is half a 1f1b stage, so 2 stashed (micro-batch, chunk) pairs weigh one
      // 1f1b stash. ZB-V's peak on every rank is 1f1b's worst rank's: P whole stages; stage s of 2P
      // holds 2P - s (docs/pipeline.md).
      const SimulationResult ofob = simulate(make_schedule(ScheduleKind::one_f_one_b, P, M));
      const int ofob_peak = *std::max_element(ofob.peak_activations_per_rank.begin(),
                                              ofob.peak_activations_per_rank.end());
      for (int peak : zb.peak_activations_per_rank) REQUIRE(peak == 2 * ofob_peak);
      for (int s = 0; s < 2 * P; ++s) REQUIRE(zb.peak_activations[size_t(s)] == 2 * P - s);
      // A third of zb-h1's bubble time per rank: P-1 units of a chunk, against P-1 of a whole stage.
      const SimulationResult h1 = simulate(make_schedule(ScheduleKind::zb_h1, P, M));
      if (P > 1) REQUIRE(zb.bubble_fraction < h1.bubble_fraction);
    }
  }
}

TEST_CASE("simulate: a zb-v with two actions swapped or a stage on the wrong rank is refused", "[pipeline]") {
  // Mutations of the generated schedule the checks must catch.
  const Schedule good = zb_v_order(3, 6);
  // Rank 2 (the turn) runs micro-batch 0 down and back up: F0.0 then F0.1. Swapped, F0.1 has no input.
  Schedule swapped = good;
  auto& r2 = swapped.actions[2];
  REQUIRE(r2[0] == F(0, 0));
  REQUIRE(r2[1] == F(0, 1));
  std::swap(r2[0], r2[1]);
  CHECK(error_of([&] { simulate(add_communication(swapped, MessagePlacement::next_to_actions)); })
            .find("needs the output of F on stage 2 (rank 2, chunk 0)") != std::string::npos);
  CHECK(error_of([&] { add_communication(swapped, MessagePlacement::lock_step); })
            .find("rank 2, step 0: F(micro-batch 0, chunk 1 = stage 3) waits for F of micro-batch 0 on stage 2 (rank 2)") !=
        std::string::npos);
  // The same order read with the interleaved placement: rank 0's chunk 1 is stage 3, not 5, and
  // its first F1 waits for stage 2's output from rank 2, which rank 2 makes only after it waits
  // for rank 0: no way to finish.
  Schedule misplaced = good;
  misplaced.layout.placement = Placement::interleaved;
  CHECK(error_of([&] { add_communication(misplaced, MessagePlacement::lock_step); }).find("can never finish") !=
        std::string::npos);
  CHECK_THROWS_AS(simulate(add_communication(misplaced)), ScheduleError);
}

TEST_CASE("schedule: dualpipev's order for P=2, M=4: overlapped F&B pairs, taken whole by the messages",
          "[pipeline]") {
  // Rank 0 (stages 0 and 3): F0 x2, F0 F1, I1 W F1, then the pairs F0&B1 F1&B0, B1 F1&B0, the drain
  // B1 I0, W I0, W. Rank 1 (the turn, stages 1 and 2): F0 F1 x2, its first F0 and B1 not paired
  // (the last rank), then pairs, then B1 B0 and, from halfway, I1 I0 and their W's.
  const Schedule d = dualpipev_order(2, 4);
  CHECK(d.layout == Layout{2, 2, Placement::v_shape});
  CHECK(names(d, 0) == "F0.0 F1.0 F2.0 F0.1 I0.1 W0.1 F1.1 F3.0& B1.1 F2.1& B0.0 B2.1 F3.1& B1.0 B3.1 I2.0 W2.0 "
                       "I3.0 W3.0");
  CHECK(names(d, 1) == "F0.0 F0.1 F1.0 F1.1 F2.0 B0.1 F2.1& B0.0 F3.0& B1.1 F3.1& B1.0 B2.1 B2.0 I3.1 I3.0 W3.1 "
                       "W3.0");
  // With messages: each pair stays together — both halves' RECVs before it, SENDs after it.
  for (int P = 1; P <= 6; ++P) {
    for (int M = 2 * P; M <= 4 * P; ++M) {
      INFO("P=" << P << " M=" << M);
      const Schedule s = make_schedule(ScheduleKind::dualpipev, P, M);
      for (int r = 0; r < P; ++r) {
        const auto& list = s.actions[size_t(r)];
        int pairs = 0;
        for (size_t i = 0; i < list.size(); ++i) {
          if (!list[i].overlapped) continue;
          ++pairs;
          REQUIRE(list[i].kind == ActionKind::forward);
          REQUIRE(i + 1 < list.size());
          REQUIRE(list[i + 1].kind == ActionKind::backward);
          REQUIRE(list[i + 1].chunk != list[i].chunk);  // one arm of the V forward, the other backward
        }
        // Steady state 2(M-2P+r+1) pairs (the last rank's first not paired), then P-r-1 more.
        REQUIRE(pairs == 2 * (M - 2 * P + r + 1) - (r == P - 1 ? 1 : 0) + (P - r - 1));
      }
      REQUIRE_NOTHROW(check_exchanges(s));
    }
  }
  // Stashes: stage s of 2P holds at most 2P - s, as under zb-v, but every rank one more than zb-v's
  // 2P at its peak — the F of a pair is stashed before its B frees one (docs/pipeline.md).
  for (int P = 1; P <= 8; ++P) {
    for (int M = 2 * P; M <= 32; ++M) {
      INFO("P=" << P << " M=" << M);
      const SimulationResult r = simulate(make_schedule(ScheduleKind::dualpipev, P, M));
      for (int s = 0; s < 2 * P; ++s) REQUIRE(r.peak_activations[size_t(s)] == 2 * P - s);
      for (int peak : r.peak_activations_per_rank) REQUIRE(peak == 2 * P + 1);
    }
  }
  CHECK(error_of([] { make_schedule(ScheduleKind::dualpipev, 4, 7); }).find("M >= 2P), got P=4, M=7, V=2") !=
        std::string::npos);
  // The simulator holds a pair together, and other placements refuse pairs.
  Schedule broken = make_schedule(ScheduleKind::dualpipev, 2, 4);
  auto& r0 = broken.actions[0];
  const size_t at = size_t(std::find_if(r0.begin(), r0.end(), [](const Action& a) { return a.overlapped; }) - r0.begin());
  std::swap(r0[at + 1], r0[at + 2]);  // something else between the F and its B
  CHECK(rejection(broken).problem == "is overlapped, but the next action is not the B or I it pairs with");
  CHECK(error_of([] { add_communication(dualpipev_order(2, 4)); }).find("use MessagePlacement::lock_step") !=
        std::string::npos);
}

TEST_CASE("simulate: peak stashed activations — gpipe M, 1f1b min(M, P - s), naive 1", "[pipeline]") {
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 32; ++M) {
      INFO("P=" << P << " M=" << M);
      const SimulationResult g = simulate(make_schedule(ScheduleKind::gpipe, P, M));
      const SimulationResult o = simulate(make_schedule(ScheduleKind::one_f_one_b, P, M));
      const SimulationResult n = simulate(make_schedule(ScheduleKind::naive, P, M));
      for (int s = 0; s < P; ++s) {
        CHECK(g.peak_activations[size_t(s)] == M);
        CHECK(o.peak_activations[size_t(s)] == std::min(M, P - s));
        CHECK(n.peak_activations[size_t(s)] == 1);
      }
      CHECK(o.peak_activations_per_rank == o.peak_activations);
    }
  }
}

TEST_CASE("simulate: messages, bytes and communication time", "[pipeline]") {
  // Every micro-batch crosses each of the S - 1 stage boundaries twice (activation, gradient).
  const SimulationResult r = simulate(make_schedule(ScheduleKind::one_f_one_b, 4, 16), Costs{}, 1000);
  CHECK(r.activation_messages == 3 * 16);
  CHECK(r.gradient_messages == 3 * 16);
  CHECK(r.bytes == 96 * 1000);
  const SimulationResult ri = simulate(make_schedule(ScheduleKind::interleaved, 4, 8, 3));
  CHECK(ri.messages() == 2 * (4 * 3 - 1) * 8);
  CHECK(ri.bytes == 0);
  CHECK(simulate(make_schedule(ScheduleKind::gpipe, 1, 4)).messages() == 0);

  // GPipe P=2, M=1, messages take 0.5: F [0,1) on rank 0; F [1.5,2.5) and B [2.5,4.5) on rank 1;
  // B [5,7) on rank 0.
  Costs slow;
  slow.communication = 0.5;
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, 1);
  const SimulationResult t = simulate(s, slow);
  CHECK(t.makespan == 7);
  const auto& rank1 = t.timeline[1];  // recvA0 F0 B0 sendG0
  CHECK(rank1[0].start == 0);
  CHECK(rank1[0].end == 1.5);  // waited for the message
  CHECK(rank1[1].start == 1.5);
  CHECK(rank1[2].end == 4.5);
  CHECK(t.timeline[0].back().start == 5);
}

TEST_CASE("simulate: bad costs and malformed schedules are errors", "[pipeline]") {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
  CHECK(error_of([&] { simulate(s, Costs{-1, 1, 1, 0, {}}); }).find("finite and non-negative") != std::string::npos);
  CHECK(error_of([&] { simulate(s, Costs{1, NAN, 1, 0, {}}); }).find("finite and non-negative") != std::string::npos);
  CHECK(error_of([&] { simulate(s, Costs{}, -5); }).find("activation size") != std::string::npos);
  Schedule wrong = s;
  wrong.actions.pop_back();
  CHECK(error_of([&] { simulate(wrong); }).find("action lists for 1 ranks, but its layout has P=2") !=
        std::string::npos);
  Schedule chunk = s;
  chunk.actions[0][0].chunk = 1;
  CHECK(rejection(chunk).problem.find("chunk 1 does not exist (V=1)") != std::string::npos);
  Schedule mb = s;
  mb.actions[0][0].microbatch = 7;
  CHECK(rejection(mb).problem.find("micro-batch 7 does not exist (M=2)") != std::string::npos);
}

TEST_CASE("simulate: a broken schedule is caught and the grid marks the offending action", "[pipeline]") {
  const Schedule good = make_schedule(ScheduleKind::one_f_one_b, 3, 3);
  REQUIRE_NOTHROW(simulate(good));

  SECTION("two actions swapped: B before its F") {
    Schedule s = good;  // the last rank runs recvA0 F0 B0 ...; swap F0 and B0
    std::swap(s.actions[2][1], s.actions[2][2]);
    const ScheduleError e = rejection(s);
    CHECK(e.rank == 2);
    CHECK(e.step == 1);
    CHECK(e.problem.find("B before its F") != std::string::npos);
    CHECK(std::string(e.what()).find("fails at rank 2, step 1, B(micro-batch 0)") != std::string::npos);
    CHECK(grid_line(e.what(), 1).find("!B0") != std::string::npos);
    // The other ranks show where they had got to.
    CHECK(std::string(e.what()).find("*recvG0<1") != std::string::npos);
  }
  SECTION("a send dropped: the RECV waits for a message nobody will send") {
    Schedule s = good;
    // Rank 1's last action sends the gradient of micro-batch 2 back to rank 0.
    REQUIRE(s.actions[1].back() == (Action{ActionKind::send_gradient, 2, 0}));
    s.actions[1].pop_back();
    const ScheduleError e = rejection(s);
    CHECK(e.rank == 0);
    CHECK(e.problem.find("RECV without a matching SEND: rank 1 never sends") != std::string::npos);
    const int step = int(good.actions[0].size()) - 2;  // rank 0's recvG2<1
    CHECK(e.step == step);
    CHECK(grid_line(e.what(), step).find("!recvG2<1") != std::string::npos);
  }
  SECTION("an early send dropped: the next message is the wrong one") {
    Schedule s = good;
    REQUIRE(s.actions[0][1] == (Action{ActionKind::send_activation, 0, 0}));
    s.actions[0].erase(s.actions[0].begin() + 1);
    const ScheduleError e = rejection(s);
    CHECK(e.rank == 1);
    CHECK(e.step == 0);
    CHECK(e.problem.find("message mismatch: expects the activation of micro-batch 0 from stage 0, but the next one "
                         "rank 0 sent is micro-batch 1") != std::string::npos);
    // Both ends are marked: the RECV, and the SEND whose message arrived instead.
    CHECK(grid_line(e.what(), 0).find("!recvA0<0") != std::string::npos);
    CHECK(grid_line(e.what(), 2).find("!sendA1>1") != std::string::npos);
  }
  SECTION("a receive dropped: F runs without its input") {
    Schedule s = good;
    s.actions[1].erase(s.actions[1].begin());
    const ScheduleError e = rejection(s);
    CHECK(e.rank == 1);
    CHECK(e.step == 0);
    CHECK(e.problem.find("no RECV before it received it") != std::string::npos);
  }
  SECTION("a cycle of waiting") {
    Schedule s = make_schedule(ScheduleKind::gpipe, 2, 2);
    // Rank 0 waits for a gradient before sending the activation the gradient depends on.
    REQUIRE(s.actions[0][1] == (Action{ActionKind::send_activation, 0, 0}));
    REQUIRE(s.actions[0][4] == (Action{ActionKind::recv_gradient, 0, 0}));
    std::swap(s.actions[0][1], s.actions[0][4]);
    const ScheduleError e = rejection(s);
    CHECK(e.problem.find("deadlock: rank 0 (step 1: RECV gradient") != std::string::npos);
    CHECK(e.problem.find("which waits for rank 1 (step 0: RECV activation") != std::string::npos);
    CHECK(grid_line(e.what(), 1).find("!recvG0<1") != std::string::npos);
    CHECK(grid_line(e.what(), 0).find("!recvA0<0") != std::string::npos);
  }
  SECTION("W before its I, and a W after a full B") {
    Schedule s = make_schedule(ScheduleKind::zb_h1, 2, 2);
    Schedule w = s;  // rank 0: F0 sendA0 F1 sendA1 recvG0 I0 W0 ...; swap I0 and W0
    REQUIRE(w.actions[0][5] == I(0));
    std::swap(w.actions[0][5], w.actions[0][6]);
    CHECK(rejection(w).problem.find("W before its I") != std::string::npos);
    Schedule b = good;
    b.actions[2].insert(b.actions[2].begin() + 3, W(0));  // after recvA0 F0 B0
    CHECK(rejection(b).problem.find("W after a full B") != std::string::npos);
  }
  SECTION("work missing or done twice") {
    Schedule missing = good;
    missing.actions[2].erase(missing.actions[2].begin() + 2);  // the last rank's B0, and its send
    missing.actions[2].erase(missing.actions[2].begin() + 2);
    missing.actions[1].erase(
        std::find(missing.actions[1].begin(), missing.actions[1].end(), Action{ActionKind::recv_gradient, 0, 0}));
    // Rank 1's B0 now runs without the gradient: caught where it happens.
    CHECK(rejection(missing).problem.find("needs the gradient of micro-batch 0") != std::string::npos);

    Schedule no_backward = make_schedule(ScheduleKind::gpipe, 1, 2);  // one rank: F0 F1 B0 B1
    no_backward.actions[0].pop_back();
    const ScheduleError e = rejection(no_backward);
    CHECK(e.problem.find("stage 0 (rank 0) never runs B (or I) for micro-batch 1") != std::string::npos);
    CHECK(e.step == 3);  // after the last action
    CHECK(grid_line(e.what(), 3).find("!(end)") != std::string::npos);

    Schedule twice = make_schedule(ScheduleKind::gpipe, 1, 2);
    twice.actions[0].insert(twice.actions[0].begin() + 1, F(0));
    CHECK(rejection(twice).problem.find("runs a second time") != std::string::npos);
  }
  SECTION("a message sent twice") {
    Schedule extra = make_schedule(ScheduleKind::gpipe, 2, 1);
    extra.actions[0].insert(extra.actions[0].begin() + 2, {ActionKind::send_activation, 0, 0});
    const ScheduleError e = rejection(extra);
    CHECK(e.problem.find("sends the same activation twice") != std::string::npos);
    CHECK(e.step == 2);
  }
  SECTION("sends and receives that leave the pipeline or stay on the rank") {
    Schedule s = make_schedule(ScheduleKind::gpipe, 2, 1);
    s.actions[1].push_back({ActionKind::send_activation, 0, 0});  // the last stage has no next stage
    CHECK(rejection(s).problem.find("no next stage to send to") != std::string::npos);
    Schedule local = make_schedule(ScheduleKind::interleaved, 1, 1, 2);
    local.actions[0].insert(local.actions[0].begin() + 1, {ActionKind::send_activation, 0, 0});
    CHECK(rejection(local).problem.find("sends to its own rank") != std::string::npos);
  }
}

TEST_CASE("grid: one column per rank, one line per step, marks in front of cells", "[pipeline]") {
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, 1);
  CHECK(action_grid(s) ==
        "step   rank 0     rank 1\n"
        "   0   F0         recvA0<0\n"
        "   1   sendA0>1   F0\n"
        "   2   recvG0<1   B0\n"
        "   3   B0         sendG0>0\n");
  CHECK(action_grid(s, {{1, 2, '!'}, {0, 4, '*'}}) ==
        "step   rank 0     rank 1\n"
        "   0   F0         recvA0<0\n"
        "   1   sendA0>1   F0\n"
        "   2   recvG0<1  !B0\n"
        "   3   B0         sendG0>0\n"
        "   4  *(end)\n");
}

TEST_CASE("timeline: the terminal chart", "[pipeline]") {
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, 2);
  const SimulationResult r = simulate(s, unit_fb());
  CHECK(timeline_text(s, r) ==
        "        0\n"
        "        |\n"
        "rank 0  FF..BB\n"
        "        01  01\n"
        "rank 1  .FFBB.\n"
        "         0101\n"
        "one character = 1 time unit; F forward, B backward, I input gradient, W weight gradient, . idle;\n"
        "below each rank: the micro-batch (0-9, a-z, A-Z)\n");
  // A B of cost 2 takes two characters; I and W are told apart.
  const Schedule z = make_schedule(ScheduleKind::zb_h1, 2, 2);
  const std::string zt = timeline_text(z, simulate(z));
  CHECK(zt.find("rank 0  FF.IWIW\n") != std::string::npos);
  CHECK(zt.find("rank 1  .FIFIWW\n") != std::string::npos);
  // Too long for the width: coarser characters, and the chart says so.
  const Schedule big = make_schedule(ScheduleKind::gpipe, 2, 100);
  const std::string bt = timeline_text(big, simulate(big), 50);
  CHECK(bt.find("one character = 6.06 time units") != std::string::npos);
  CHECK(microbatch_symbol(9) == '9');
  CHECK(microbatch_symbol(10) == 'a');
  CHECK(microbatch_symbol(36) == 'A');
  CHECK(microbatch_symbol(62) == '0');
}

TEST_CASE("timeline: the SVG, written atomically", "[pipeline]") {
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 2);
  const SimulationResult r = simulate(s);
  const std::string svg = timeline_svg(s, r);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>\n") == svg.size() - 7);
  // One block per compute action, each with a tooltip; a row per rank; bubbles hatched; a legend.
  size_t blocks = 0;
  for (size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) ++blocks;
  CHECK(blocks == 2 * 2 * 2 * 2);  // M x S x (F, B)
  CHECK(svg.find(">rank 1</text>") != std::string::npos);
  CHECK(svg.find("fill=\"url(#idle)\"") != std::string::npos);
  CHECK(svg.find("W weight gradient") != std::string::npos);
  CHECK(svg.find(">time</text>") != std::string::npos);
  CHECK(svg.find("F1.1") != std::string::npos);  // blocks wide enough are labelled

  const auto dir = std::filesystem::temp_directory_path() / "brigade_test_pipeline_svg";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "timeline.svg").string();
  {
    std::ofstream old(path);
    old << "old contents";
  }
  save_timeline_svg(path, s, r);
  std::ifstream in(path);
  std::stringstream read;
  read << in.rdbuf();
  CHECK(read.str() == svg);
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}) == 1);
  CHECK(error_of([&] {
          save_timeline_svg((dir / "missing" / "x.svg").string(), s, r);
        }).find("save_timeline_svg: cannot create") != std::string::npos);
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}) == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("brigade simulate: the report, the chart, the SVG and the errors", "[pipeline][cli]") {
  auto run = [](const std::vector<std::string>& args, std::string* err_text = nullptr) {
    return test::run_cli(brigade::simulate_cli::simulate_command, args, err_text);
  };
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const auto [status, text] = run({"--stages", "4", "--microbatches", "16", "--schedule", schedule});
    CHECK(status == 0);
    CHECK(text.find("\nbubble fraction: 0.1579\n") != std::string::npos);
    CHECK(text.find("\nbubble/compute: 0.1875\n") != std::string::npos);
    CHECK(text.find("textbook: (P-1)/(M+P-1) = 0.1579") != std::string::npos);
    CHECK(text.find("rank 3  ") != std::string::npos);
  }
  {
    const auto [status, text] = run({"--stages=4", "--microbatches=16"});
    CHECK(status == 0);
    CHECK(text.find("peak stashed activations per stage: 4 3 2 1\n") != std::string::npos);
    CHECK(text.find("messages: 96 (48 activations, 48 gradients)\n") != std::string::npos);
    CHECK(text.find("costs: F=1 B=2 (input 1 + weight 1), communication 0\n") != std::string::npos);
  }
  {
    const auto [status, text] = run({"--schedule", "zb-h1", "--stages", "4", "--microbatches", "8", "--cost-b", "1",
                                     "--activation-bytes", "1048576", "--grid"});
    CHECK(status == 0);
    CHECK(text.find("bubble fraction: 0.1111\n") != std::string::npos);
    CHECK(text.find("costs: F=1 I=1 W=1") != std::string::npos);
    CHECK(text.find("messages: 48 (24 activations, 24 gradients), 48.0 MiB\n") != std::string::npos);
    CHECK(text.find("step   rank 0") != std::string::npos);  // --grid
  }
  {
    const auto [status, text] = run({"--schedule", "zb-v", "--stages", "4", "--microbatches", "8"});
    CHECK(status == 0);
    CHECK(text.find("4 ranks, 8 micro-batches, 2 chunks per rank (8 stages)") != std::string::npos);
    CHECK(text.find("bubble fraction: 0.0588\n") != std::string::npos);  // 3/51
    CHECK(text.find("textbook: (P-1)/(6M+P-1) = 0.0588") != std::string::npos);
    CHECK(text.find("peak stashed activations per rank: 8 8 8 8\n") != std::string::npos);
    CHECK(text.find("messages: 96 (48 activations, 48 gradients)") != std::string::npos);  // 2P-2 crossings each way
  }
  {
    const auto [status, text] = run({"--schedule", "interleaved", "--stages", "4", "--microbatches", "8"});
    CHECK(status == 0);
    CHECK(text.find("4 ranks, 8 micro-batches, 2 chunks per rank (8 stages)") != std::string::npos);
    CHECK(text.find("peak stashed activations per rank: ") != std::string::npos);
  }
  {
    const auto dir = std::filesystem::temp_directory_path() / "brigade_test_simulate_cli";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "t.svg").string();
    const auto [status, text] = run({"--svg", path});
    CHECK(status == 0);
    CHECK(text.find("timeline written to " + path) != std::string::npos);
    CHECK(std::filesystem::file_size(path) > 1000);
    std::string err;
    CHECK(run({"--svg", (dir / "no" / "such" / "dir.svg").string()}, &err).first == 1);
    CHECK(err.find("brigade simulate: error: save_timeline_svg: cannot create") != std::string::npos);
    std::filesystem::remove_all(dir);
  }
  std::string err;
  CHECK(run({"--help"}).first == 0);
  CHECK(run({"--help"}).second.find("--cost-w X") != std::string::npos);
  CHECK(run({"--schedule", "2f2b"}, &err).first == 2);
  CHECK(err.find("--schedule: expected naive, gpipe, 1f1b, interleaved, zb-h1, zb-v or dualpipev, got '2f2b'") !=
        std::string::npos);
  CHECK(err.find("usage: brigade simulate") != std::string::npos);
  CHECK(run({"--stages", "0"}, &err).first == 2);
  CHECK(err.find("--stages: must be between 1 and 4096, got 0") != std::string::npos);
  CHECK(run({"--cost-f", "-1"}, &err).first == 2);
  CHECK(err.find("--cost-f: must be non-negative") != std::string::npos);
  CHECK(run({"--microbatches"}, &err).first == 2);
  CHECK(err.find("--microbatches: missing value (M)") != std::string::npos);
  CHECK(run({"--grid=yes"}, &err).first == 2);
  CHECK(err.find("--grid: takes no value") != std::string::npos);
  CHECK(run({"--frobnicate"}, &err).first == 2);
  CHECK(err.find("unknown flag '--frobnicate'") != std::string::npos);
  CHECK(run({"--schedule", "interleaved", "--stages", "4", "--microbatches", "6"}, &err).first == 2);
  CHECK(err.find("P=4, M=6, V=2") != std::string::npos);
  CHECK(run({"--schedule", "gpipe", "--chunks", "2"}, &err).first == 2);
  CHECK(err.find("interleaved, zb-v and dualpipev are the schedules for V > 1") != std::string::npos);
  CHECK(run({"--schedule", "zb-v", "--chunks", "3"}, &err).first == 2);
  CHECK(err.find("zb-v: holds exactly two chunks per rank") != std::string::npos);
}
