// A measured pipeline step: its bubble, its Chrome trace, and its timeline in the simulator's shape
// (see trace.h). The picture of both timelines is in timeline_compare_svg.cpp.
#include "pipeline/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"

namespace brigade::pipeline {

double Trace::makespan() const {
  if (events.empty()) return 0;
  double first = std::numeric_limits<double>::infinity();
  double last = -first;
  for (const TraceEvent& e : events) {
    first = std::min(first, e.start);
    last = std::max(last, e.end);
  }
  return last - first;
}

double Trace::busy(int rank) const {
  double total = 0;
  for (const TraceEvent& e : events) {
    if (e.rank == rank && is_compute(e.action.kind)) total += e.end - e.start;
  }
  return total;
}

double Trace::measured_bubble() const {
  const double capacity = double(ranks) * makespan();
  if (!(capacity > 0)) return 0;
  double busy = 0;  // one pass over the events rather than one per rank
  for (const TraceEvent& e : events) {
    if (e.rank >= 0 && e.rank < ranks && is_compute(e.action.kind)) busy += e.end - e.start;
  }
  return 1.0 - busy / capacity;
}

namespace {

// The trace must describe the schedule it is read with: same ranks, sane times.
void check_trace(const Trace& trace, const Schedule& schedule, const char* who) {
  BRIGADE_CHECK(trace.ranks == schedule.ranks(), who, ": the trace has ", trace.ranks, " ranks, but schedule '",
                schedule.name, "' has P=", schedule.ranks());
  for (const TraceEvent& e : trace.events) {
    BRIGADE_CHECK(e.rank >= 0 && e.rank < trace.ranks, who, ": an event of rank ", e.rank, " in a trace of ",
                  trace.ranks, " ranks");
    BRIGADE_CHECK(std::isfinite(e.start) && std::isfinite(e.end) && e.end >= e.start, who, ": event ",
                  short_name(e.action, e.rank, schedule.layout), " on rank ", e.rank, " runs from ", e.start, " to ",
                  e.end, " s (times must be finite, and the end not before the start)");
  }
}

double earliest_start(const Trace& trace) {
  double first = std::numeric_limits<double>::infinity();
  for (const TraceEvent& e : trace.events) first = std::min(first, e.start);
  return trace.events.empty() ? 0 : first;
}

// Microseconds with nanosecond resolution: plain decimal, valid JSON for any finite value.
std::string microseconds(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", seconds * 1e6);
  return text;
}

}  // namespace

std::string chrome_trace_json(const Trace& trace, const Schedule& schedule) {
  check_trace(trace, schedule, "chrome_trace_json");
  const Layout& layout = schedule.layout;
  // Times count from the start of the step, so they are normally >= 0; a clock that ran a little
  // early on some rank is shifted rather than written as a negative timestamp.
  const double origin = std::min(0.0, earliest_start(trace));

  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  os << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":"
     << json_string("brigade pipeline: " + schedule.name) << "}}";
  for (int r = 0; r < trace.ranks; ++r) {
    os << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << r << ",\"args\":{\"name\":"
       << json_string("rank " + std::to_string(r)) << "}}"
       << ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":" << r << ",\"args\":{\"sort_index\":" << r
       << "}}";
  }
  // Rank by rank, in time order: the same file for the same trace, and easy to read by eye.
  std::vector<size_t> order(trace.events.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TraceEvent &x = trace.events[a], &y = trace.events[b];
    return std::tie(x.rank, x.start) < std::tie(y.rank, y.start);
  });
  for (size_t k : order) {
    const TraceEvent& e = trace.events[k];
    const Action& a = e.action;
    os << ",\n{\"name\":" << json_string(short_name(a, e.rank, layout)) << ",\"cat\":\""
       << (is_compute(a.kind) ? "compute" : "comm") << "\",\"ph\":\"X\",\"pid\":0,\"tid\":" << e.rank
       << ",\"ts\":" << microseconds(e.start - origin) << ",\"dur\":" << microseconds(e.end - e.start)
       << ",\"args\":{\"kind\":\"" << kind_name(a.kind) << "\",\"micro-batch\":" << a.microbatch
       << ",\"chunk\":" << a.chunk << ",\"stage\":" << layout.stage(e.rank, a.chunk);
    const int peer = layout.peer_stage(a, e.rank);
    if (peer >= 0) os << ",\"peer rank\":" << layout.rank_of(peer) << ",\"peer stage\":" << peer;
    os << "}}";
  }
  os << "\n]}\n";
  return os.str();
}

void save_chrome_trace(const std::string& path, const Trace& trace, const Schedule& schedule) {
  write_file_atomically(path, chrome_trace_json(trace, schedule), "save_chrome_trace");
}

SimulationResult to_simulation(const Trace& trace, const Schedule& schedule, const SimulationResult* simulated) {
  check_trace(trace, schedule, "to_simulation");
  const int P = schedule.ranks();
  // Each rank's events by what they did; an action that runs twice (it should not) takes them in
  // time order.
  using Key = std::tuple<ActionKind, int, int>;  // kind, micro-batch, chunk
  using EventsByAction = std::map<Key, std::vector<const TraceEvent*>>;
  std::vector<EventsByAction> by_action(static_cast<size_t>(P));
  for (const TraceEvent& e : trace.events)
    by_action[size_t(e.rank)][{e.action.kind, e.action.microbatch, e.action.chunk}].push_back(&e);
  for (auto& rank : by_action) {
    for (auto& [key, list] : rank)
      std::stable_sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->start < b->start; });
  }

  const double origin = earliest_start(trace);
  SimulationResult result;
  result.timeline.assign(size_t(P), {});
  result.busy.assign(size_t(P), 0.0);
  for (int r = 0; r < P; ++r) {
    auto& timeline = result.timeline[size_t(r)];
    auto& events = by_action[size_t(r)];
    double previous_end = 0;
    for (const Action& a : schedule.actions[size_t(r)]) {
      auto& list = events[{a.kind, a.microbatch, a.chunk}];
      TimedAction t{a, previous_end, previous_end};  // not in the trace: a zero-length mark in place
      if (!list.empty()) {
        t.start = list.front()->start - origin;
        t.end = list.front()->end - origin;
        list.erase(list.begin());
        if (is_compute(a.kind)) result.busy[size_t(r)] += t.end - t.start;
      }
      timeline.push_back(t);
      previous_end = t.end;
      result.makespan = std::max(result.makespan, t.end);
    }
    for (const auto& [key, list] : events) {
      BRIGADE_CHECK(list.empty(), "to_simulation: rank ", r, "'s trace has ",
                    short_name(list.front()->action, r, schedule.layout), " (from ", list.front()->start, " s) ",
                    "more often than schedule '", schedule.name, "' runs it on that rank");
    }
  }

  double busy = 0;
  for (double b : result.busy) busy += b;
  const double capacity = double(P) * result.makespan;
  result.bubble_fraction = capacity > 0 ? 1.0 - busy / capacity : 0.0;
  result.bubble_ratio = busy > 0 ? (capacity - busy) / busy : 0.0;
  if (simulated) {
    result.peak_activations = simulated->peak_activations;
    result.peak_activations_per_rank = simulated->peak_activations_per_rank;
    result.activation_messages = simulated->activation_messages;
    result.gradient_messages = simulated->gradient_messages;
    result.bytes = simulated->bytes;
  }
  return result;
}

namespace {

void add_event(ActionCosts& c, const TraceEvent& e) {
  auto add = [](double& total, int64_t& count, double duration) {
    total += duration;
    ++count;
  };
  const double d = e.end - e.start;
  switch (e.action.kind) {
    case ActionKind::forward: add(c.forward, c.forwards, d); break;
    case ActionKind::backward: add(c.backward, c.backwards, d); break;
    case ActionKind::backward_input: add(c.backward_input, c.backward_inputs, d); break;
    case ActionKind::backward_weight: add(c.backward_weight, c.backward_weights, d); break;
    default: break;  // messages are not compute
  }
}

// Totals to means.
void finish_means(ActionCosts& c) {
  auto mean = [](double& total, int64_t n) { total = n > 0 ? total / double(n) : 0; };
  mean(c.forward, c.forwards);
  mean(c.backward, c.backwards);
  mean(c.backward_input, c.backward_inputs);
  mean(c.backward_weight, c.backward_weights);
}

}  // namespace

ActionCosts mean_action_costs(const std::vector<Trace>& traces) {
  ActionCosts c;
  for (const Trace& trace : traces)
    for (const TraceEvent& e : trace.events) add_event(c, e);
  finish_means(c);
  return c;
}

std::vector<ActionCosts> stage_action_costs(const std::vector<Trace>& traces, const Layout& layout) {
  std::vector<ActionCosts> stages(size_t(layout.stages()));
  for (const Trace& trace : traces) {
    BRIGADE_CHECK(trace.ranks == layout.ranks, "stage_action_costs: a trace of ", trace.ranks,
                  " ranks, but the layout has P=", layout.ranks);
    for (const TraceEvent& e : trace.events) {
      if (!is_compute(e.action.kind)) continue;
      BRIGADE_CHECK(e.rank >= 0 && e.rank < layout.ranks && e.action.chunk >= 0 && e.action.chunk < layout.chunks,
                    "stage_action_costs: an event of rank ", e.rank, ", chunk ", e.action.chunk, " in a layout of P=",
                    layout.ranks, ", V=", layout.chunks);
      add_event(stages[size_t(layout.stage(e.rank, e.action.chunk))], e);
    }
  }
  for (ActionCosts& c : stages) finish_means(c);
  return stages;
}

Costs simulator_costs(const ActionCosts& measured) {
  Costs c;
  c.forward = measured.forward;
  if (measured.backward_inputs > 0) {
    c.backward = measured.backward_input;
    c.weight = measured.backward_weight;
  } else {
    c.backward = measured.backward;
    c.weight = 0;
  }
  c.communication = 0;  // the exchanges' cost is what the comparison with the measurement shows
  return c;
}

std::vector<MeasuredStageMemory> stage_memory(const std::vector<Trace>& traces, const Layout& layout) {
  std::vector<MeasuredStageMemory> stages(size_t(layout.stages()));
  std::vector<int64_t> forwards(stages.size(), 0), inputs(stages.size(), 0);
  for (const Trace& trace : traces) {
    BRIGADE_CHECK(trace.ranks == layout.ranks, "stage_memory: a trace of ", trace.ranks, " ranks, but the layout has P=",
                  layout.ranks);
    // Events in time order per rank, so each stage's first B or W is the one that made its gradients.
    std::vector<const TraceEvent*> events;
    for (const TraceEvent& e : trace.events)
      if (is_compute(e.action.kind) && e.memory_peak >= 0) events.push_back(&e);
    std::stable_sort(events.begin(), events.end(), [](auto* a, auto* b) { return a->start < b->start; });
    std::vector<bool> backward_seen(stages.size(), false);
    for (const TraceEvent* e : events) {
      const size_t s = size_t(layout.stage(e->rank, e->action.chunk));
      MeasuredStageMemory& m = stages[s];
      if (e->action.kind == ActionKind::forward) {
        m.activations += e->memory_end - e->memory_start;
        ++forwards[s];
      }
      if (e->action.kind == ActionKind::backward_input) {
        m.deferred += e->memory_end - e->memory_start;
        ++inputs[s];
      }
      const bool makes_gradients = e->action.kind == ActionKind::backward || e->action.kind == ActionKind::backward_weight;
      if (makes_gradients && !backward_seen[s]) {
        backward_seen[s] = true;
        continue;
      }
      m.workspace = std::max(m.workspace, e->memory_peak - std::max(e->memory_start, e->memory_end));
    }
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    stages[s].measured = forwards[s] > 0;
    // Another rank's thread may free, during this rank's forward, a tensor charged to this rank (the
    // threads' transport hands a sent gradient over; core/host_memory.h): a stage whose forward keeps
    // little can then measure less than nothing. A stash is never negative.
    if (forwards[s] > 0) stages[s].activations = std::max(0.0, stages[s].activations / double(forwards[s]));
    if (inputs[s] > 0) stages[s].deferred = std::max(0.0, stages[s].deferred / double(inputs[s]));
  }
  return stages;
}

Costs simulator_costs(const ActionCosts& mean, const std::vector<ActionCosts>& per_stage) {
  Costs c = simulator_costs(mean);
  for (const ActionCosts& stage : per_stage) {
    const Costs own = simulator_costs(stage);
    c.stages.push_back({own.forward, own.backward, own.weight});
  }
  return c;
}

}  // namespace brigade::pipeline
