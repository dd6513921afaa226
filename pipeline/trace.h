// Tracing a real pipeline step: when each action started and ended, on every rank.
//
// The runtime records one TraceEvent per action it runs (compute actions, and every exchange of
// messages as one event per message action). Times are seconds from the start of the step on that
// rank's clock; the step starts right after a barrier, so ranks' clocks line up to within a barrier's
// latency. On a GPU the times come from CUDA events recorded on the stage's stream around the work
// (read back after the step), so they measure the GPU, not the host's launch loop.
//
// From a trace:
//   - measured_bubble(): the same definition as the simulator's, 1 - sum(busy) / (P * makespan),
//     busy = the compute actions' time;
//   - chrome_trace_json(): the Chrome trace-event format, which Perfetto (ui.perfetto.dev) and
//     chrome://tracing open: one track per rank, one slice per action;
//   - to_simulation(): the trace in the simulator's shape, so timeline_svg() and timeline_text()
//     draw the measured timeline exactly as they draw a predicted one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/schedule.h"
#include "pipeline/analysis/simulator.h"

namespace brigade::pipeline {

struct TraceEvent {
  int rank = 0;
  Action action;
  double start = 0;  // seconds since the step began on this rank
  double end = 0;
  // Bytes the rank held on its device (its MemoryAccount, core/memory_account.h: host memory on the
  // CPU, GPU memory on a GPU) when the action started, when it ended, and the most during it; -1 when
  // not measured (a caller that set no account).
  double memory_start = -1, memory_end = -1, memory_peak = -1;
};

struct Trace {
  int ranks = 0;
  std::vector<TraceEvent> events;  // any order; to_simulation() sorts per rank

  double makespan() const;         // latest end - earliest start, over all ranks
  double busy(int rank) const;     // sum of the rank's compute actions' durations
  double measured_bubble() const;  // 1 - sum(busy) / (ranks * makespan); 0 for an empty trace
};

// The events as Chrome trace JSON ("traceEvents", complete events "ph":"X" in microseconds, one
// "tid" per rank with thread_name metadata "rank r"; each slice named like the grid: "F3", "B3.1",
// "sendA3>1"; args carry micro-batch, chunk, stage and kind).
std::string chrome_trace_json(const Trace& trace, const Schedule& schedule);
// Writes chrome_trace_json() to `path` atomically (temporary file + rename); throws naming the path.
void save_chrome_trace(const std::string& path, const Trace& trace, const Schedule& schedule);

// The measured timeline as a SimulationResult: timeline[rank] holds the rank's actions in the
// schedule's order with measured start/end (actions missing from the trace get start = end = the
// previous action's end), makespan, busy, bubble_fraction and bubble_ratio filled in; peak
// activations and message counts are copied from `simulated` when given.
SimulationResult to_simulation(const Trace& trace, const Schedule& schedule, const SimulationResult* simulated = nullptr);

// Mean duration of each compute kind over the traces, in seconds; 0 (with count 0) for a kind that
// never ran — B in split schedules, I and W in the others.
struct ActionCosts {
  double forward = 0, backward = 0, backward_input = 0, backward_weight = 0;
  int64_t forwards = 0, backwards = 0, backward_inputs = 0, backward_weights = 0;
};
ActionCosts mean_action_costs(const std::vector<Trace>& traces);

// The simulator's costs from measured means: a split schedule's I and W as they are; an unsplit
// one's whole B as the input half with a zero weight half (the simulator charges B = I + W).
Costs simulator_costs(const ActionCosts& costs);

// The same means per global stage (layout.stage(rank, chunk) of each event): P*V entries, in stage
// order. A stage whose layers differ from the others' (the embedding, the head) has its own costs.
std::vector<ActionCosts> stage_action_costs(const std::vector<Trace>& traces, const Layout& layout);
// The simulator's costs with one entry per stage (each converted as above); `mean` fills the
// uniform fields, which the simulator does not use once per-stage costs are there.
Costs simulator_costs(const ActionCosts& mean, const std::vector<ActionCosts>& per_stage);

// Each stage's memory as measured by a trace with memory (P*V entries, stage order): one micro-batch's
// stash (the mean of what its forwards kept: end - start), what an I keeps for its W, and the workspace (the most any of its
// actions held beyond both its start and its end, leaving out each stage's first B or W, which also
// creates the gradients). `measured` is false for a stage without forwards measured.
struct MeasuredStageMemory {
  bool measured = false;
  double activations = 0;
  double deferred = 0;  // the mean of what its I actions kept (for their W); 0 without I
  double workspace = 0;
};
std::vector<MeasuredStageMemory> stage_memory(const std::vector<Trace>& traces, const Layout& layout);

// Two timelines in one SVG, one above the other, each stretched over the same width — each to its
// own makespan, since a simulation with unit costs and a measurement share no scale: "simulated
// (unit costs ...)" and "measured (... ms)". `simulated_unit` names the simulation's time unit in
// its subtitle: "time units" for unit costs, "s" when it ran on measured costs in seconds. Each
// panel is drawn as timeline_svg() draws one.
std::string timeline_svg_compare(const Schedule& schedule, const SimulationResult& simulated,
                                 const SimulationResult& measured, const std::string& simulated_title,
                                 const std::string& measured_title, const std::string& simulated_unit = "time units");
void save_timeline_svg_compare(const std::string& path, const Schedule& schedule, const SimulationResult& simulated,
                               const SimulationResult& measured, const std::string& simulated_title,
                               const std::string& measured_title, const std::string& simulated_unit = "time units");

}  // namespace brigade::pipeline
