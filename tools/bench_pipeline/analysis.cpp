#include "bench_pipeline/analysis.h"

#include <algorithm>
#include <utility>

namespace brigade::bench_pipeline {

using pipeline::ActionKind;
using pipeline::Trace;
using pipeline::TraceEvent;
using Intervals = std::vector<std::pair<double, double>>;

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
