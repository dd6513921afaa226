// The pieces timeline_svg() is drawn from, shared with timeline_svg_compare() (pipeline/trace.h)
// so that a measured timeline is drawn exactly like a simulated one. Internal to pipeline/; not
// installed.
//
// A picture is: the document start, one or more panels stacked downwards (each a title, a subtitle,
// one row per rank, the time axis), the legend, the document end. Coordinates are SVG user units.
#pragma once

#include <ostream>
#include <string>

#include "pipeline/schedule.h"
#include "pipeline/analysis/simulator.h"

namespace brigade::pipeline::svg {

// Every picture is this wide.
double document_width();
// The height of one panel with `ranks` rows, from its top to where the next thing may start.
double panel_height(int ranks);
// The height of the legend for `microbatches` micro-batch swatches.
double legend_height(int microbatches);

// The <svg> element (width x height), the hatch pattern for idle time, a white background.
void begin_document(std::ostream& os, double height);
// One timeline: `title` in bold, `subtitle` under it, then one row per rank of result.timeline
// (compute actions as blocks coloured by micro-batch, idle time hatched) and a time axis, scaled so
// that result.makespan fills the plot width. `top` is the panel's top edge. Both strings are
// escaped here.
void draw_panel(std::ostream& os, const Schedule& schedule, const SimulationResult& result, const std::string& title,
                const std::string& subtitle, double top);
// The kinds' shades, the idle hatch, and one swatch per micro-batch, starting at `top`.
void draw_legend(std::ostream& os, int microbatches, double top);
void end_document(std::ostream& os);

// "bubble fraction 0.1579, makespan 57<unit> (hatched: idle)": the usual subtitle.
std::string bubble_subtitle(const SimulationResult& result, const std::string& unit);

}  // namespace brigade::pipeline::svg
