// The measured timeline drawn under the simulated one (see trace.h): two panels made by the same
// code as timeline_svg(), so any difference between them is in the timings, not in the drawing.
#include <sstream>

#include "core/atomic_file.h"
#include "pipeline/analysis/timeline_svg_panel.h"
#include "pipeline/trace.h"

namespace brigade::pipeline {

std::string timeline_svg_compare(const Schedule& schedule, const SimulationResult& simulated,
                                 const SimulationResult& measured, const std::string& simulated_title,
                                 const std::string& measured_title, const std::string& simulated_unit) {
  std::ostringstream about;
  about << schedule.name << ", P=" << schedule.ranks() << ", M=" << schedule.microbatches << ", V=" << schedule.chunks()
        << "; ";
  // Each panel spans the full width over its own makespan: unit-cost time and measured seconds have
  // no common scale, and what is compared is the shape — where the bubbles are.
  const double top_height = svg::panel_height(int(simulated.timeline.size()));
  const double bottom_height = svg::panel_height(int(measured.timeline.size()));

  std::ostringstream os;
  svg::begin_document(os, top_height + bottom_height + svg::legend_height(schedule.microbatches));
  const std::string simulated_subtitle = about.str() + svg::bubble_subtitle(simulated, " " + simulated_unit);
  const std::string measured_subtitle = about.str() + svg::bubble_subtitle(measured, " s");
  svg::draw_panel(os, schedule, simulated, simulated_title, simulated_subtitle, 0);
  svg::draw_panel(os, schedule, measured, measured_title, measured_subtitle, top_height);
  svg::draw_legend(os, schedule.microbatches, top_height + bottom_height);
  svg::end_document(os);
  return os.str();
}

void save_timeline_svg_compare(const std::string& path, const Schedule& schedule, const SimulationResult& simulated,
                               const SimulationResult& measured, const std::string& simulated_title,
                               const std::string& measured_title, const std::string& simulated_unit) {
  write_file_atomically(path,
                        timeline_svg_compare(schedule, simulated, measured, simulated_title, measured_title,
                                             simulated_unit),
                        "save_timeline_svg_compare");
}

}  // namespace brigade::pipeline
