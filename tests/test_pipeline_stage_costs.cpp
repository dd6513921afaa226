// Per-stage costs in the simulator: each stage's F, I and W take that stage's own time. Checked
// against makespans derived by hand, against the uniform model they must reproduce, against a trace
// whose per-stage means are computed by hand, and through `brigade simulate`'s lists of costs.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/analysis/simulator.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"
#include "cli_run.h"
#include "test_util.h"
#include "tools/simulate/command.h"

using namespace brigade;
using namespace brigade::pipeline;
using test::error_of;

namespace {

// Stage s costs f = 1 + s%3 (so the slow stage moves around), I = 2 f, W = 0: an unsplit B of 2 f.
// `slow`, when >= 0, makes that stage 5x slower in both directions.
Costs varied(int stages, int slow = -1) {
  Costs c;
  for (int s = 0; s < stages; ++s) {
    const double f = (1 + s % 3) * (s == slow ? 5.0 : 1.0);
    c.stages.push_back({f, 2 * f, 0});
  }
  return c;
}

double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

// GPipe runs all M forwards, then all M backwards. Each phase is a flow line of M identical jobs
// through the stages (forward: 0 to S-1; backward: S-1 to 0) with unlimited buffers, whose last job
// finishes after sum(p) + (M-1) * max(p): the longest path through the (job, stage) grid takes
// every stage once and the slowest one M times. The backward phase starts on the last stage when its
// forwards end, and no earlier stage is still forwarding then. So
//   makespan = sum(f) + (M-1) max(f) + sum(b) + (M-1) max(b),
// and naive (one micro-batch through the whole pipeline at a time) takes M (sum(f) + sum(b)).
TEST_CASE("simulate: gpipe and naive with per-stage costs take the hand-derived makespan", "[pipeline]") {
  for (int P = 1; P <= 6; ++P) {
    for (int M = 1; M <= 12; ++M) {
      for (int slow = -1; slow < P; ++slow) {
        INFO("P=" << P << " M=" << M << " slow stage " << slow);
        const Costs c = varied(P, slow);
        std::vector<double> f, b;
        for (const StageCost& s : c.stages) {
          f.push_back(s.forward);
          b.push_back(s.backward + s.weight);
        }
        const double gpipe = sum_of(f) + (M - 1) * max_of(f) + sum_of(b) + (M - 1) * max_of(b);
        const SimulationResult r = simulate(make_schedule(ScheduleKind::gpipe, P, M), c);
        CHECK(r.makespan == Approx(gpipe).margin(1e-9));
        // Each rank is busy with its own stage's work only.
        for (int s = 0; s < P; ++s) CHECK(r.busy[size_t(s)] == Approx(M * (f[size_t(s)] + b[size_t(s)])));
        const double busy = M * (sum_of(f) + sum_of(b));
        CHECK(r.bubble_fraction == Approx(1 - busy / (P * gpipe)).margin(1e-12));
        CHECK(simulate(make_schedule(ScheduleKind::naive, P, M), c).makespan == Approx(busy).margin(1e-9));
      }
    }
  }
}

// 1F1B with one slow stage s (f = 4, b = 8) among fast ones (f = 1, b = 2): once its first input
// is there, the slow rank never waits. Its inputs come from faster stages that run ahead in their
// warm-up; the gradient of micro-batch m returns 3 per later stage after its F(m), while the slow
// rank runs its P-s-1 further warm-up forwards (4 each; there are that many when M >= P - s) or, in
// the steady state, a whole B (8). So
// it starts after the earlier stages' F of micro-batch 0, works M (f + b) without a break, and the
// last backward then walks back down the earlier stages:
//   makespan = sum over k < s of (f_k + b_k) + M (f_s + b_s).
// (With equal stages that is not the formula: there the later stages do delay it.)
TEST_CASE("simulate: 1f1b with one slow stage keeps it busy from its first input to its last backward",
          "[pipeline]") {
  for (int P = 2; P <= 5; ++P) {
    for (int M = 1; M <= 12; ++M) {
      for (int slow = std::max(0, P - M); slow < P; ++slow) {  // M >= P - slow
        INFO("P=" << P << " M=" << M << " slow stage " << slow);
        Costs c;
        for (int s = 0; s < P; ++s) c.stages.push_back({s == slow ? 4.0 : 1.0, s == slow ? 8.0 : 2.0, 0});
        const double expected = slow * 3.0 + M * 12.0;
        const SimulationResult r = simulate(make_schedule(ScheduleKind::one_f_one_b, P, M), c);
        CHECK(r.makespan == Approx(expected).margin(1e-9));
        CHECK(r.busy[size_t(slow)] == Approx(M * 12.0));
      }
    }
  }
}

TEST_CASE("simulate: per-stage costs all equal to the uniform ones reproduce its timeline exactly", "[pipeline]") {
  for (ScheduleKind kind : all_schedule_kinds()) {
    const int V = default_chunks(kind);
    for (int P : {1, 2, 4}) {
      const int M = 2 * P;
      Schedule schedule;
      try {
        schedule = make_schedule(kind, P, M, V);
      } catch (const Error&) {
        continue;  // a configuration this schedule refuses
      }
      INFO(schedule.name << " P=" << P << " M=" << M << " V=" << V);
      const Costs uniform{1.5, 0.75, 0.5, 0.25, {}};
      Costs per_stage = uniform;
      per_stage.stages.assign(size_t(schedule.stages()), StageCost{1.5, 0.75, 0.5});
      const SimulationResult a = simulate(schedule, uniform), b = simulate(schedule, per_stage);
      CHECK(a.makespan == b.makespan);
      CHECK(a.bubble_fraction == b.bubble_fraction);
      CHECK(a.busy == b.busy);
      for (size_t r = 0; r < a.timeline.size(); ++r) {
        for (size_t i = 0; i < a.timeline[r].size(); ++i) {
          CHECK(a.timeline[r][i].start == b.timeline[r][i].start);
          CHECK(a.timeline[r][i].end == b.timeline[r][i].end);
        }
      }
    }
  }
}

TEST_CASE("simulate: a wrong count of stage costs, or a negative or NaN one, names the stage", "[pipeline]") {
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 4, 2);  // 4 stages
  Costs three;
  three.stages.assign(3, StageCost{});
  CHECK(error_of([&] { simulate(s, three); }).find("3 per-stage costs given, but the schedule has 4 stages (P*V)") !=
        std::string::npos);
  Costs negative;
  negative.stages.assign(4, StageCost{});
  negative.stages[2].backward = -1;
  CHECK(error_of([&] { simulate(s, negative); }).find("the costs of stage 2 must be finite and non-negative") !=
        std::string::npos);
  Costs nan = negative;
  nan.stages[2].backward = 1;
  nan.stages[3].weight = NAN;
  CHECK(error_of([&] { simulate(s, nan); }).find("stage 3 must be finite") != std::string::npos);
}

// Interleaved, P=2, V=2: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3. Each stage's mean is
// worked out from the events below by hand.
TEST_CASE("stage_action_costs: each stage's own means, from a trace", "[pipeline]") {
  const Layout layout{2, 2, Placement::interleaved};
  Trace t;
  t.ranks = 2;
  t.events = {
      {0, F(0, 0), 0, 1},  {0, F(1, 0), 1, 4},  // stage 0: F (1 + 3) / 2 = 2
      {0, F(0, 1), 4, 9},                       // stage 2: F 5
      {1, F(0, 0), 1, 2},                       // stage 1: F 1
      {1, F(0, 1), 2, 9},  {1, B(0, 1), 9, 13}, // stage 3: F 7, B 4
      {0, B(0, 0), 13, 19},                     // stage 0: B 6
      {0, {ActionKind::send_activation, 0, 0}, 19, 30},  // not compute: ignored
  };
  const std::vector<ActionCosts> s = stage_action_costs({t}, layout);
  REQUIRE(s.size() == 4);
  CHECK(s[0].forward == 2);
  CHECK(s[0].forwards == 2);
  CHECK(s[0].backward == 6);
  CHECK(s[1].forward == 1);
  CHECK(s[1].backwards == 0);
  CHECK(s[2].forward == 5);
  CHECK(s[3].forward == 7);
  CHECK(s[3].backward == 4);
  const Costs c = simulator_costs(mean_action_costs({t}), s);
  REQUIRE(c.stages.size() == 4);
  CHECK(c.stages[3].forward == 7);
  CHECK(c.stages[3].backward + c.stages[3].weight == 4);  // unsplit: the whole B as the input half
  CHECK(c.stages[0].backward == 6);
  CHECK(c.forward == Approx(17.0 / 5));  // (1 + 3 + 5 + 1 + 7) / 5  // the uniform fields keep the overall mean

  Trace wrong = t;
  wrong.ranks = 3;
  CHECK(error_of([&] { stage_action_costs({wrong}, layout); }).find("a trace of 3 ranks, but the layout has P=2") !=
        std::string::npos);
}

TEST_CASE("brigade simulate: --cost-f/-b/-w lists give each stage its own cost", "[pipeline][cli]") {
  auto run = [](const std::vector<std::string>& args, std::string* err_text = nullptr) {
    return test::run_cli(brigade::simulate_cli::simulate_command, args, err_text);
  };
  // gpipe, P=3, M=4: f = 1,3,1, b = 2 + 0 each: 5 + 3*3 + 6 + 3*2 = 26; busy 4*(5+6) = 44.
  const auto [status, text] = run({"--schedule", "gpipe", "--stages", "3", "--microbatches", "4", "--cost-f", "1,3,1",
                                   "--cost-b", "2", "--cost-w", "0"});
  CHECK(status == 0);
  CHECK(text.find("costs per stage: F=1,3,1 I=2,2,2 W=0,0,0, communication 0\n") != std::string::npos);
  CHECK(text.find("makespan: 26 time units") != std::string::npos);
  CHECK(text.find("textbook:") == std::string::npos);  // the formulas assume equal stages

  std::string err;
  CHECK(run({"--stages", "4", "--cost-f", "1,2,3"}, &err).first == 2);
  CHECK(err.find("--cost-f: 3 per-stage costs, but the schedule has 4 stages (P*V)") != std::string::npos);
  CHECK(run({"--stages", "2", "--cost-w", "1,-2"}, &err).first == 2);
  CHECK(err.find("--cost-w: stage 1's cost: must be non-negative") != std::string::npos);
  CHECK(run({"--stages", "2", "--cost-b", "1,nan"}, &err).first == 2);
  CHECK(err.find("--cost-b: stage 1's cost: expected a number") != std::string::npos);
}
