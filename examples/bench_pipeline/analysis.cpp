#include "bench_pipeline/analysis.h"

#include <algorithm>
#include <utility>

namespace brigade::bench_pipeline {

using pipeline::ActionKind;
using pipeline::Trace;
using pipeline::TraceEvent;
using Intervals = std::vector<std::pair<double, double>>;

ActionCosts mean_action_costs(const std::vector<Trace>& traces) {
  ActionCosts c;
  auto add = [](double& total, int64_t& count, double duration) {
    total += duration;
    ++count;
  };
  for (const Trace& trace : traces) {
    for (const TraceEvent& e : trace.events) {
      const double d = e.end - e.start;
      switch (e.action.kind) {
        case ActionKind::forward: add(c.forward, c.forwards, d); break;
        case ActionKind::backward: add(c.backward, c.backwards, d); break;
        case ActionKind::backward_input: add(c.backward_input, c.backward_inputs, d); break;
        case ActionKind::backward_weight: add(c.backward_weight, c.backward_weights, d); break;
        default: break;  // messages are not compute
      }
    }
  }
  auto mean = [](double& total, int64_t n) { total = n > 0 ? total / double(n) : 0; };
  mean(c.forward, c.forwards);
  mean(c.backward, c.backwards);
  mean(c.backward_input, c.backward_inputs);
  mean(c.backward_weight, c.backward_weights);
  return c;
}

pipeline::Costs simulator_costs(const ActionCosts& measured) {
  pipeline::Costs c;
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

namespace {

// Sorted, disjoint, non-empty intervals covering the same time.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [start, end] : v) {
    if (!(end > start)) continue;
    if (!out.empty() && start <= out.back().second) out.back().second = std::max(out.back().second, end);
    else out.emplace_back(start, end);
  }
  return out;
}

}  // namespace

double union_length(Intervals intervals) {
  double total = 0;
  for (const auto& [start, end] : merged(std::move(intervals))) total += end - start;
  return total;
}

double overlap_length(Intervals a, Intervals b) {
  a = merged(std::move(a));
  b = merged(std::move(b));
  double total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double start = std::max(a[i].first, b[j].first);
    const double end = std::min(a[i].second, b[j].second);
    if (end > start) total += end - start;
    // The interval that ends first can overlap nothing further along the other list.
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return total;
}

std::vector<RankTime> rank_times(const Trace& trace) {
  const size_t P = size_t(std::max(trace.ranks, 0));
  std::vector<Intervals> compute(P), exchange(P);
  for (const TraceEvent& e : trace.events) {
    if (e.rank < 0 || size_t(e.rank) >= P) continue;
    (pipeline::is_compute(e.action.kind) ? compute : exchange)[size_t(e.rank)].emplace_back(e.start, e.end);
  }
  std::vector<RankTime> out(P);
  for (size_t r = 0; r < P; ++r) {
    out[r].compute = trace.busy(int(r));
    out[r].exchange = union_length(exchange[r]);
    Intervals others;
    for (size_t q = 0; q < P; ++q)
      if (q != r) others.insert(others.end(), compute[q].begin(), compute[q].end());
    out[r].hidden = overlap_length(exchange[r], others);
  }
  return out;
}

}  // namespace brigade::bench_pipeline
