// predict_memory against peaks worked out by hand from the schedules' orders.
#include <catch2/catch.hpp>
#include <algorithm>
#include <string>

#include "pipeline/analysis/memory.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"
#include "test_util.h"

using namespace brigade;
using namespace brigade::pipeline;
using test::error_of;

namespace {

// Stage s: parameters 1000 (s+1), gradients the same, AdamW state twice that, a stash of 10 (s+1)^2
// per micro-batch: every size differs, so a stage or rank mixed up shows.
MemoryModel sizes(int stages, int64_t communication = 5) {
  MemoryModel m;
  for (int s = 0; s < stages; ++s) {
    const int64_t p = 1000 * (s + 1);
    m.stages.push_back({p, p, 2 * p, 10 * (s + 1) * (s + 1), 0});
  }
  m.communication = communication;
  return m;
}

// What a rank with one stage s holds all step, and with its gradients.
int64_t states(const MemoryModel& m, int s) {
  return m.stages[size_t(s)].parameters + m.stages[size_t(s)].optimizer + m.communication;
}
int64_t with_gradients(const MemoryModel& m, int s) { return states(m, s) + m.stages[size_t(s)].gradients; }

}  // namespace

// 1F1B: rank r runs min(M, P - r) forwards, then its first B — which creates the gradients while all
// those stashes are still held. GPipe holds all M at its first B; naive one at a time.
TEST_CASE("predict_memory: 1f1b, gpipe and naive peaks by hand", "[pipeline]") {
  for (int P = 1; P <= 6; ++P) {
    for (int M = 1; M <= 12; ++M) {
      INFO("P=" << P << " M=" << M);
      const MemoryModel m = sizes(P);
      const auto f1b = predict_memory(make_schedule(ScheduleKind::one_f_one_b, P, M), m);
      const auto gpipe = predict_memory(make_schedule(ScheduleKind::gpipe, P, M), m);
      const auto naive = predict_memory(make_schedule(ScheduleKind::naive, P, M), m);
      for (int r = 0; r < P; ++r) {
        const int64_t a = m.stages[size_t(r)].activations;
        CHECK(f1b[size_t(r)].peak == with_gradients(m, r) + std::min(M, P - r) * a);
        CHECK(f1b[size_t(r)].activations == std::min(M, P - r) * a);
        CHECK(f1b[size_t(r)].states == states(m, r));
        CHECK(f1b[size_t(r)].gradients == m.stages[size_t(r)].gradients);
        CHECK(gpipe[size_t(r)].peak == with_gradients(m, r) + M * a);
        CHECK(naive[size_t(r)].peak == with_gradients(m, r) + a);
      }
    }
  }
  // P=2, M=4, 1F1B, rank 0 (F0 sendA0 F1 sendA1 recvG0 B0 ...) reaches its peak during B0.
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 4);
  const MemoryModel m = sizes(2);
  const auto r = predict_memory(s, m);
  CHECK(r[0].peak == 1000 + 2000 + 5 + 1000 + 2 * 10);
  CHECK(r[1].peak == 2000 + 4000 + 5 + 2000 + 40);
  CHECK(s.actions[0][size_t(r[0].peak_step)].kind == ActionKind::backward);
  CHECK(s.actions[0][size_t(r[0].peak_step)].microbatch == 0);
}

// ZB-H1, P=2, M=4 (brigade simulate --schedule zb-h1 --stages 2 --microbatches 4 --grid):
//   rank 0: F0 F1 I0 W0 F2 I1 W1 F3 I2 W2 I3 W3
//   rank 1: F0 I0 F1 I1 W0 F2 I2 W1 F3 I3 W2 W3
// I keeps the stash, W frees it and (the first time) makes the gradients. Rank 0 holds F0 and F1's
// stashes at W0: 2 a0 + g0. Rank 1 holds two as well (F1 runs before W0 frees micro-batch 0's),
// one more than under 1F1B, where B0 frees it before F1.
TEST_CASE("predict_memory: zb-h1 keeps each stash until its W", "[pipeline]") {
  const MemoryModel m = sizes(2);
  const auto zb = predict_memory(make_schedule(ScheduleKind::zb_h1, 2, 4), m);
  CHECK(zb[0].peak == with_gradients(m, 0) + 2 * 10);
  CHECK(zb[1].peak == with_gradients(m, 1) + 2 * 40);
  // The gradients come with W0, not I0: rank 0 first reaches its peak there.
  const Schedule zb_h1 = make_schedule(ScheduleKind::zb_h1, 2, 4);
  CHECK(zb_h1.actions[0][size_t(zb[0].peak_step)].kind == ActionKind::backward_weight);
  const auto f1b = predict_memory(make_schedule(ScheduleKind::one_f_one_b, 2, 4), m);
  CHECK(f1b[1].peak == with_gradients(m, 1) + 40);
}

// Interleaved P=2, V=2: rank 0 holds stages 0 and 2; resident bytes and workspace add up per rank.
TEST_CASE("predict_memory: chunks, resident bytes and workspace", "[pipeline]") {
  MemoryModel m = sizes(4, 0);
  m.resident = {7, 11};
  const Schedule s = make_schedule(ScheduleKind::naive, 2, 1, 1);
  MemoryModel one = sizes(2, 0);
  one.stages[1].workspace = 300;  // rank 1's B (or F) uses 300 for a moment
  const auto r = predict_memory(s, one);
  CHECK(r[1].peak == with_gradients(one, 1) + 40 + 300);
  const auto inter = predict_memory(make_schedule(ScheduleKind::interleaved, 2, 4, 2), m);
  // Rank 0's states: stages 0 and 2 (1000 + 2000 and 3000 + 6000) plus 7 resident.
  CHECK(inter[0].states == 3000 + 9000 + 7);
  CHECK(inter[1].states == 6000 + 12000 + 11);
  for (const RankMemory& r : inter) CHECK(r.peak == r.states + r.gradients + r.activations + r.workspace);
}

TEST_CASE("predict_memory: bad sizes name the stage or rank", "[pipeline]") {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
  MemoryModel m = sizes(3);
  CHECK(error_of([&] { predict_memory(s, m); }).find("3 stages' sizes given, but schedule '1f1b' has 2 stages") !=
        std::string::npos);
  m = sizes(2);
  m.stages[1].activations = -1;
  CHECK(error_of([&] { predict_memory(s, m); }).find("stage 1's sizes must be non-negative") != std::string::npos);
  m = sizes(2);
  m.resident = {0, -3};
  CHECK(error_of([&] { predict_memory(s, m); }).find("rank 1's resident size is negative") != std::string::npos);
  m.resident = {0};
  CHECK(error_of([&] { predict_memory(s, m); }).find("1 ranks' resident sizes given") != std::string::npos);
}

// Message buffers. A received gradient is held from its RECV to the B that uses it: 1F1B P=2, M=4,
// rank 0 receives micro-batch 0's gradient just before B0, at its peak of two stashes.
// A sent gradient stays with its sender until the receiver's RECV ends. GPipe P=2, M=2, F = B = 1,
// messages taking 2: rank 1 runs F0 [3,4], F1 [4,5], B0 [5,6], B1 [6,7]; rank 0's RECV of B0's
// gradient ends at 6 + 2 = 8, so during B1 rank 1 holds one stash (40) and that message (1000):
// more than its two stashes (80) during B0.
TEST_CASE("predict_memory: received and sent message buffers", "[pipeline]") {
  MemoryModel m = sizes(2);
  m.stages[0].gradient_in = 500;
  const auto f1b = predict_memory(make_schedule(ScheduleKind::one_f_one_b, 2, 4), m);
  CHECK(f1b[0].peak == with_gradients(m, 0) + 2 * 10 + 500);
  CHECK(f1b[1].peak == with_gradients(m, 1) + 40);  // the last stage receives no gradient

  MemoryModel out = sizes(2);
  out.stages[1].gradient_out = 1000;
  const Schedule gpipe = make_schedule(ScheduleKind::gpipe, 2, 2);
  Costs costs;
  costs.weight = 0;
  costs.communication = 2;
  const SimulationResult timing = simulate(gpipe, costs);
  const auto held = predict_memory(gpipe, out, &timing);
  CHECK(held[1].peak == with_gradients(out, 1) + 40 + 1000);
  CHECK(gpipe.actions[1][size_t(held[1].peak_step)] == Action{ActionKind::backward, 1, 0});
  // Without the timing the sent buffers are not counted; with instant messages they are taken at once.
  CHECK(predict_memory(gpipe, out)[1].peak == with_gradients(out, 1) + 80);
  costs.communication = 0;
  const SimulationResult instant = simulate(gpipe, costs);
  CHECK(predict_memory(gpipe, out, &instant)[1].peak == with_gradients(out, 1) + 80);
}

// stage_memory from a trace with memory, worked out by hand: (start, end, peak) bytes per event.
TEST_CASE("stage_memory: stash, I-to-W bytes and workspace per stage, from a trace", "[pipeline]") {
  auto event = [](int rank, Action a, double t, double start, double end, double peak) {
    return TraceEvent{rank, a, t, t + 1, start, end, peak};
  };
  Trace t;
  t.ranks = 2;
  t.events = {
      event(0, F(0), 0, 100, 160, 170),  // stage 0: keeps 60, 10 more for a moment
      event(0, F(1), 1, 160, 220, 230),  // keeps 60, 10 more
      event(0, B(0), 5, 220, 190, 400),  // the first B makes the gradients: not workspace
      event(0, B(1), 6, 190, 150, 260),  // 70 above its start
      event(1, F(0), 1, 0, 50, 50),      // stage 1: keeps 50
      event(1, I(0), 2, 50, 70, 90),     // keeps 20 for W, 20 more for a moment
      event(1, W(0), 3, 70, 0, 500),     // the first W: not workspace
      {0, {ActionKind::send_activation, 0, 0}, 1, 1, 999, 999, 9999},  // not compute: ignored
  };
  const std::vector<MeasuredStageMemory> m = stage_memory({t}, Layout{2, 1, Placement::interleaved});
  REQUIRE(m.size() == 2);
  CHECK(m[0].measured);
  CHECK(m[0].activations == 60);
  CHECK(m[0].workspace == 70);
  CHECK(m[0].deferred == 0);
  CHECK(m[1].activations == 50);
  CHECK(m[1].deferred == 20);
  CHECK(m[1].workspace == 20);
  Trace unmeasured = t;
  for (TraceEvent& e : unmeasured.events) e.memory_start = e.memory_end = e.memory_peak = -1;
  CHECK_FALSE(stage_memory({unmeasured}, Layout{2, 1, Placement::interleaved})[0].measured);
}
