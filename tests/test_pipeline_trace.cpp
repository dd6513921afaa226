// Traces of a pipeline step: makespan, busy time and bubble of a hand-timed trace (computed by hand);
// the simulator's own timeline read back as a trace gives back the simulator's bubble; the Chrome
// trace JSON parsed by the library's strict reader (core/json.h); the measured-against-simulated
// SVG; and atomic saves.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "pipeline/schedule.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/analysis/timeline.h"
#include "pipeline/trace.h"
#include "test_util.h"

using namespace brigade;
using namespace brigade::pipeline;
using test::error_of;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// ---- Traces.

// 1F1B with P = 2, M = 2, timed by hand (seconds; binary fractions, so sums are exact):
//   rank 0: F0 [0,1] sendA0 [1,1.25] F1 [1.25,2.25] sendA1 [2.25,2.5] recvG0 [2.5,4.5] B0 [4.5,6.5]
//           recvG1 [6.5,8] B1 [8,10]
//   rank 1: recvA0 [0.5,1.25] F0 [1.25,2.25] B0 [2.25,4.25] sendG0 [4.25,4.5] recvA1 [4.5,4.75]
//           F1 [4.75,5.75] B1 [5.75,7.75] sendG1 [7.75,8]
// makespan 10; busy: rank 0 1+1+2+2 = 6, rank 1 1+2+1+2 = 6; bubble 1 - 12/20 = 0.4.
Trace hand_trace(const Schedule& s, double offset = 0) {
  const std::vector<std::vector<std::pair<double, double>>> times = {
      {{0, 1}, {1, 1.25}, {1.25, 2.25}, {2.25, 2.5}, {2.5, 4.5}, {4.5, 6.5}, {6.5, 8}, {8, 10}},
      {{0.5, 1.25}, {1.25, 2.25}, {2.25, 4.25}, {4.25, 4.5}, {4.5, 4.75}, {4.75, 5.75}, {5.75, 7.75}, {7.75, 8}},
  };
  Trace trace;
  trace.ranks = 2;
  for (int r = 1; r >= 0; --r) {  // in no particular order: rank 1 first, each rank backwards
    for (size_t i = times[size_t(r)].size(); i-- > 0;) {
      const auto [start, end] = times[size_t(r)][i];
      trace.events.push_back({r, s.actions[size_t(r)][i], start + offset, end + offset});
    }
  }
  return trace;
}

Schedule one_f_one_b_2x2() {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
  auto names = [&](int r) {
    std::string out;
    for (const Action& a : s.actions[size_t(r)]) out += short_name(a, r, s.layout) + " ";
    return out;
  };
  REQUIRE(names(0) == "F0 sendA0>1 F1 sendA1>1 recvG0<1 B0 recvG1<1 B1 ");
  REQUIRE(names(1) == "recvA0<0 F0 B0 sendG0>0 recvA1<0 F1 B1 sendG1>0 ");
  return s;
}

// The simulator's timeline, as the runtime would have recorded it.
Trace trace_of(const SimulationResult& r) {
  Trace trace;
  trace.ranks = int(r.timeline.size());
  for (int rank = trace.ranks - 1; rank >= 0; --rank) {
    for (const TimedAction& t : r.timeline[size_t(rank)]) trace.events.push_back({rank, t.action, t.start, t.end});
  }
  return trace;
}

const Json& event_named(const Json& events, const std::string& name, int tid) {
  for (const Json& e : events.items) {
    if (e["ph"].string == "X" && e["name"].string == name && e["tid"].number == tid) return e;
  }
  throw std::runtime_error("no event " + name + " on tid " + std::to_string(tid));
}

}  // namespace

TEST_CASE("trace: makespan, busy time and bubble of a hand-timed step", "[pipeline]") {
  const Schedule s = one_f_one_b_2x2();
  for (double offset : {0.0, 3.0}) {  // a step that starts later on the clock measures the same
    INFO("offset " << offset);
    const Trace trace = hand_trace(s, offset);
    CHECK(trace.makespan() == 10);
    CHECK(trace.busy(0) == 6);  // compute only: messages and their waits are not busy time
    CHECK(trace.busy(1) == 6);
    CHECK(trace.measured_bubble() == Approx(0.4).margin(1e-12));

    const SimulationResult m = to_simulation(trace, s);
    CHECK(m.makespan == 10);
    CHECK(m.busy == std::vector<double>{6, 6});
    CHECK(m.bubble_fraction == Approx(0.4).margin(1e-12));
    CHECK(m.bubble_ratio == Approx(8.0 / 12.0).margin(1e-12));
    // In the schedule's order, times from the earliest start.
    REQUIRE(m.timeline.size() == 2);
    REQUIRE(m.timeline[1].size() == 8);
    CHECK(m.timeline[1][0].action == s.actions[1][0]);
    CHECK((m.timeline[1][0].start == 0.5 && m.timeline[1][0].end == 1.25));
    CHECK((m.timeline[0][5].action == B(0) && m.timeline[0][5].start == 4.5 && m.timeline[0][5].end == 6.5));
    CHECK(m.peak_activations.empty());  // nothing to copy them from
  }
  const Trace empty{2, {}};
  CHECK(empty.makespan() == 0);
  CHECK(empty.measured_bubble() == 0);

  SECTION("an action missing from the trace stands where the previous one ended") {
    Trace trace = hand_trace(s);
    const auto missing = std::find_if(trace.events.begin(), trace.events.end(), [](const TraceEvent& e) {
      return e.rank == 1 && e.action.kind == ActionKind::send_gradient && e.action.microbatch == 0;
    });
    REQUIRE(missing != trace.events.end());
    trace.events.erase(missing);
    const SimulationResult m = to_simulation(trace, s);
    CHECK((m.timeline[1][3].start == 4.25 && m.timeline[1][3].end == 4.25));
    CHECK(m.busy == std::vector<double>{6, 6});
  }
  SECTION("an event the schedule does not run, or a trace of another shape, is an error") {
    Trace trace = hand_trace(s);
    trace.events.push_back({0, F(1), 10, 11});
    CHECK(contains(error_of([&] { to_simulation(trace, s); }),
                   "to_simulation: rank 0's trace has F1 (from 10 s) more often than schedule '1f1b' runs it"));
    trace = hand_trace(s);
    trace.ranks = 3;
    CHECK(contains(error_of([&] { to_simulation(trace, s); }),
                   "to_simulation: the trace has 3 ranks, but schedule '1f1b' has P=2"));
    trace = hand_trace(s);
    trace.events[0].end = trace.events[0].start - 1;
    CHECK(contains(error_of([&] { chrome_trace_json(trace, s); }), "chrome_trace_json: event sendG1>0 on rank 1"));
  }
}

TEST_CASE("trace: the simulator's timeline read back as a trace gives back the simulator's bubble", "[pipeline]") {
  int checked = 0;
  for (ScheduleKind kind : all_schedule_kinds()) {
    for (int P : {1, 2, 3, 4}) {
      for (int M : {1, 4, 8}) {
        if (kind == ScheduleKind::interleaved && M % P != 0) continue;
        if (kind == ScheduleKind::dualpipev && M < 2 * P) continue;
        const Schedule s = make_schedule(kind, P, M);  // interleaved, zb-v, dualpipev: 2 chunks per rank
        for (const Costs& costs : {Costs{}, Costs{2, 1, 3, 0.5, {}}, Costs{1, 1, 0, 0, {}}}) {
          INFO(schedule_name(kind) << " P=" << P << " M=" << M << " costs F=" << costs.forward);
          const SimulationResult sim = simulate(s, costs, 1000);
          const Trace trace = trace_of(sim);
          CHECK(trace.makespan() == Approx(sim.makespan));
          CHECK(trace.measured_bubble() == Approx(sim.bubble_fraction).margin(1e-12));

          const SimulationResult back = to_simulation(trace, s, &sim);
          CHECK(back.bubble_fraction == Approx(sim.bubble_fraction).margin(1e-12));
          CHECK(back.bubble_ratio == Approx(sim.bubble_ratio).margin(1e-12));
          CHECK(back.makespan == Approx(sim.makespan));
          for (int r = 0; r < P; ++r) {
            CHECK(back.busy[size_t(r)] == Approx(sim.busy[size_t(r)]));
            REQUIRE(back.timeline[size_t(r)].size() == sim.timeline[size_t(r)].size());
            for (size_t i = 0; i < sim.timeline[size_t(r)].size(); ++i) {
              const TimedAction &a = back.timeline[size_t(r)][i], &b = sim.timeline[size_t(r)][i];
              REQUIRE((a.action == b.action && a.start == b.start && a.end == b.end));
            }
          }
          CHECK(back.peak_activations == sim.peak_activations);
          CHECK(back.peak_activations_per_rank == sim.peak_activations_per_rank);
          CHECK(back.messages() == sim.messages());
          CHECK(back.bytes == sim.bytes);
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("trace: Chrome trace JSON, read back by a strict parser", "[pipeline]") {
  Schedule s = one_f_one_b_2x2();
  s.name = "1f1b \"quoted\" \\ back\nslash \x01";  // every kind of character JSON must escape
  const Trace trace = hand_trace(s);
  const std::string text = chrome_trace_json(trace, s);
  Json doc;
  REQUIRE_NOTHROW(doc = parse_json(text));
  REQUIRE(doc.kind == Json::Kind::object);
  CHECK(doc["displayTimeUnit"].string == "ms");
  const Json& events = doc["traceEvents"];
  REQUIRE(events.kind == Json::Kind::array);

  // One complete event per trace event, all on pid 0, never negative; names and tids per rank.
  size_t slices = 0;
  std::vector<std::string> thread_names(2);
  std::string process_name;
  for (const Json& e : events.items) {
    CHECK(e["pid"].number == 0);
    if (e["ph"].string == "X") {
      ++slices;
      CHECK(e["ts"].number >= 0);
      CHECK(e["dur"].number >= 0);
      CHECK((e["tid"].number == 0 || e["tid"].number == 1));
      CHECK(e["cat"].string == (e["name"].string[0] == 's' || e["name"].string[0] == 'r' ? "comm" : "compute"));
    } else {
      CHECK(e["ph"].string == "M");
      if (e["name"].string == "thread_name") thread_names.at(size_t(e["tid"].number)) = e["args"]["name"].string;
      if (e["name"].string == "process_name") process_name = e["args"]["name"].string;
    }
  }
  CHECK(slices == trace.events.size());
  CHECK(thread_names == std::vector<std::string>{"rank 0", "rank 1"});
  CHECK(process_name == "brigade pipeline: " + s.name);  // escaped on the way out, intact on the way back

  // Microseconds: B0 on rank 0 ran from 4.5 s to 6.5 s; rank 1's RECV of A0 from 0.5 s to 1.25 s.
  const Json& b0 = event_named(events, "B0", 0);
  CHECK(b0["ts"].number == 4.5e6);
  CHECK(b0["dur"].number == 2e6);
  CHECK(b0["cat"].string == "compute");
  CHECK(b0["args"]["micro-batch"].number == 0);
  CHECK(b0["args"]["stage"].number == 0);
  CHECK(b0["args"]["kind"].string == "backward");
  const Json& recv = event_named(events, "recvA0<0", 1);
  CHECK(recv["ts"].number == 0.5e6);
  CHECK(recv["dur"].number == 0.75e6);
  CHECK(recv["cat"].string == "comm");
  CHECK(recv["args"]["peer rank"].number == 0);

  // Clocks that started a little early are shifted, never written as negative timestamps.
  const Trace early = hand_trace(s, -0.25);
  const Json shifted = parse_json(chrome_trace_json(early, s));
  CHECK(event_named(shifted["traceEvents"], "F0", 0)["ts"].number == 0);
  CHECK(event_named(shifted["traceEvents"], "B0", 0)["ts"].number == 4.5e6);

  // Chunks appear in the names, as in the grid.
  const Schedule inter = make_schedule(ScheduleKind::interleaved, 2, 2, 2);
  const Json chunked = parse_json(chrome_trace_json(trace_of(simulate(inter)), inter));
  CHECK(event_named(chunked["traceEvents"], "F1.1", 0)["args"]["stage"].number == 2);
  CHECK(event_named(chunked["traceEvents"], "sendA0.0>1", 0)["args"]["chunk"].number == 0);

  // The reader itself rejects what it should.
  CHECK_THROWS(parse_json("{\"a\":\"raw\ncontrol\"}"));
  CHECK_THROWS(parse_json("{\"a\":1,}"));
  CHECK_THROWS(parse_json("{\"a\":01}"));
  CHECK_THROWS(parse_json("{\"a\":\"\\q\"}"));
  CHECK_THROWS(parse_json("[1] 2"));
}

TEST_CASE("trace: simulated and measured timelines in one SVG", "[pipeline]") {
  const Schedule s = one_f_one_b_2x2();
  const SimulationResult sim = simulate(s);
  const SimulationResult measured = to_simulation(hand_trace(s), s, &sim);
  const std::string svg = timeline_svg_compare(s, sim, measured, "simulated (unit costs F=1 B=2)",
                                               "measured (10000 ms) <cpu & threads>");
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>\n") == svg.size() - 7);
  CHECK(contains(svg, ">simulated (unit costs F=1 B=2)</text>"));
  CHECK(contains(svg, ">measured (10000 ms) &lt;cpu &amp; threads&gt;</text>"));
  CHECK(count(svg, ">rank 1</text>") == 2);
  // Each panel's subtitle names its unit: unit costs in time units, the measurement in seconds.
  CHECK(contains(svg, " time units (hatched: idle)"));
  CHECK(contains(svg, "makespan 10 s (hatched: idle)"));  // the measured panel
  CHECK(!contains(timeline_svg_compare(s, sim, measured, "a", "b", "s"), "time units"));

  // One block (with its tooltip) per compute action of each panel: 8 simulated, then 8 measured.
  const size_t split = svg.find(">measured (");
  REQUIRE(split != std::string::npos);
  CHECK(count(svg.substr(0, split), "<title>") == 8);
  CHECK(count(svg.substr(split), "<title>") == 8);
  CHECK(contains(svg.substr(split), "B(micro-batch 0) on rank 0: 4.5 to 6.5</title>"));

  // The top panel is drawn exactly as timeline_svg() draws the simulation: same blocks, same places.
  std::istringstream lines(timeline_svg(s, sim));
  int blocks = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!contains(line, "<title>")) continue;
    ++blocks;
    CHECK(contains(svg.substr(0, split), line));
  }
  CHECK(blocks == 8);
}

TEST_CASE("trace: saves are atomic and name the path when they fail", "[pipeline]") {
  const Schedule s = one_f_one_b_2x2();
  const Trace trace = hand_trace(s);
  const SimulationResult sim = simulate(s);
  const SimulationResult measured = to_simulation(trace, s, &sim);
  const auto dir = std::filesystem::temp_directory_path() / "brigade_test_pipeline_trace";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  auto entries = [&] {
    return std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{});
  };

  const auto json_path = dir / "trace.json";
  {
    std::ofstream old(json_path);
    old << "old contents";
  }
  save_chrome_trace(json_path.string(), trace, s);
  CHECK(read(json_path) == chrome_trace_json(trace, s));
  const auto svg_path = dir / "compare.svg";
  save_timeline_svg_compare(svg_path.string(), s, sim, measured, "simulated", "measured");
  CHECK(read(svg_path) == timeline_svg_compare(s, sim, measured, "simulated", "measured"));
  CHECK(entries() == 2);  // no temporary file left behind

  const std::string missing_json = (dir / "missing" / "trace.json").string();
  const std::string json_error = error_of([&] { save_chrome_trace(missing_json, trace, s); });
  CHECK(contains(json_error, "save_chrome_trace: cannot create"));
  CHECK(contains(json_error, missing_json));
  const std::string missing_svg = (dir / "missing" / "compare.svg").string();
  const std::string svg_error =
      error_of([&] { save_timeline_svg_compare(missing_svg, s, sim, measured, "simulated", "measured"); });
  CHECK(contains(svg_error, "save_timeline_svg_compare: cannot create"));
  CHECK(contains(svg_error, missing_svg));
  CHECK(entries() == 2);
  std::filesystem::remove_all(dir);
}
