// Drawing a simulated schedule: in the terminal (text) and as an SVG picture.
//
// Both draw one row per rank along the time axis: each compute action as a block as long as its
// cost, idle time (the bubble) left empty. The text chart spends one character per time unit (or
// per the shortest action, or coarser when the chart would be too wide) and uses two lines per rank
// — the kind (F, B, I, W) above the micro-batch (0-9, a-z, A-Z) — plus a third with the chunk when
// ranks hold several:
//
//   rank 0  FFFF......BBBBBBBB
//           0123      00112233
//   rank 1  .FFFF....BB...
//
// The SVG gives every micro-batch its own colour, lighter for F and darker for B/I and W, labels
// blocks that are wide enough, hatches the idle time and adds a time axis and a legend.
#pragma once

#include <string>

#include "pipeline/schedule.h"
#include "pipeline/analysis/simulator.h"

namespace brigade::pipeline {

// The chart is at most `max_width` characters of time (plus the row labels).
std::string timeline_text(const Schedule& schedule, const SimulationResult& result, int max_width = 200);

std::string timeline_svg(const Schedule& schedule, const SimulationResult& result);

// Writes timeline_svg() to `path` atomically: into a temporary file next to it, then renamed over
// it, so a reader never sees half a picture. Throws an Error naming the path when it cannot.
void save_timeline_svg(const std::string& path, const Schedule& schedule, const SimulationResult& result);

// The character for micro-batch m in the text chart: 0-9, a-z, A-Z, then round again.
char microbatch_symbol(int m);

}  // namespace brigade::pipeline
