// The terminal chart of a simulated schedule (see timeline.h).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/format.h"
#include "pipeline/analysis/timeline.h"

namespace brigade::pipeline {

char microbatch_symbol(int m) {
  static const char kSymbols[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  constexpr int n = int(sizeof(kSymbols)) - 1;
  return kSymbols[((m % n) + n) % n];
}

namespace {

char kind_letter(ActionKind k) {
  switch (k) {
    case ActionKind::forward: return 'F';
    case ActionKind::backward: return 'B';
    case ActionKind::backward_input: return 'I';
    case ActionKind::backward_weight: return 'W';
    default: return '?';
  }
}

}  // namespace

std::string timeline_text(const Schedule& schedule, const SimulationResult& result, int max_width) {
  const double makespan = result.makespan;
  if (!(makespan > 0)) return "(nothing to draw: the step takes no time)\n";

  // One character per unit of the shortest action, so that no action disappears — unless that
  // makes the chart wider than max_width; then actions shorter than a character may.
  double shortest = makespan;
  for (const auto& rank : result.timeline) {
    for (const TimedAction& t : rank) {
      if (is_compute(t.action.kind) && t.end > t.start) shortest = std::min(shortest, t.end - t.start);
    }
  }
  double unit = shortest;
  if (makespan / unit > double(std::max(max_width, 10))) unit = makespan / double(std::max(max_width, 10));
  const int columns = std::max(1, int(std::ceil(makespan / unit - 1e-9)));

  const bool show_chunks = schedule.chunks() > 1;
  const int label_width = int(("rank " + std::to_string(result.timeline.size())).size()) + 2;
  std::ostringstream os;

  // Axis: a tick every 10 columns, labelled with its time.
  std::string ticks(size_t(columns), ' ');
  std::string labels(size_t(columns) + 12, ' ');
  for (int c = 0; c < columns; c += 10) {
    ticks[size_t(c)] = '|';
    const std::string text = format_significant(c * unit, 4);
    labels.replace(size_t(c), text.size(), text);
  }
  labels.erase(labels.find_last_not_of(' ') + 1);
  ticks.erase(ticks.find_last_not_of(' ') + 1);
  os << std::string(size_t(label_width), ' ') << labels << "\n"
     << std::string(size_t(label_width), ' ') << ticks << "\n";

  for (size_t r = 0; r < result.timeline.size(); ++r) {
    std::string kinds(size_t(columns), '.'), microbatches(size_t(columns), ' '), chunks(size_t(columns), ' ');
    // Each column shows the action running at its midpoint.
    const auto& actions = result.timeline[r];
    size_t a = 0;
    for (int c = 0; c < columns; ++c) {
      const double t = (c + 0.5) * unit;
      while (a < actions.size() && (!is_compute(actions[a].action.kind) || actions[a].end <= t)) ++a;
      if (a < actions.size() && actions[a].start <= t) {
        kinds[size_t(c)] = kind_letter(actions[a].action.kind);
        microbatches[size_t(c)] = microbatch_symbol(actions[a].action.microbatch);
        chunks[size_t(c)] = char('0' + actions[a].action.chunk % 10);
      }
    }
    auto line = [&](const std::string& label, std::string row) {
      row.erase(row.find_last_not_of(' ') + 1);
      os << label << std::string(size_t(label_width) - label.size(), ' ') << row << "\n";
    };
    line("rank " + std::to_string(r), kinds);
    line("", microbatches);
    if (show_chunks) line("", chunks);
  }

  os << "one character = " << format_significant(unit, 4) << " time unit" << (unit == 1 ? "" : "s")
     << "; F forward, B backward, I input gradient, W weight gradient, . idle;\n"
     << "below each rank: the micro-batch (0-9, a-z, A-Z)" << (show_chunks ? ", then the chunk" : "") << "\n";
  return os.str();
}

}  // namespace brigade::pipeline
