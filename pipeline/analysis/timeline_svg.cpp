// The SVG picture of a simulated schedule (see timeline.h): plain SVG 1.1, no scripts, no fonts
// beyond the generic sans-serif, so any browser or image viewer shows it. Drawn from the pieces in
// timeline_svg_panel.h, which the measured-against-simulated picture (trace.h) stacks differently.
#include <cmath>
#include <sstream>

#include "core/atomic_file.h"
#include "core/format.h"
#include "pipeline/analysis/svg.h"
#include "pipeline/analysis/timeline.h"
#include "pipeline/analysis/timeline_svg_panel.h"

namespace brigade::pipeline {

namespace {

constexpr double kLeft = 80;  // room for the row labels
constexpr double kTop = 50;   // room for the title
constexpr double kPlotWidth = 1000;
constexpr double kRowHeight = 28;
constexpr double kRowGap = 6;
constexpr int kSwatchesPerLine = 20;

std::string fmt(double v) { return svg::coordinate(v); }
using svg::escape;
using svg::tick_step;

// Text baselines sit on whole units (every top in the layout is one), printed without decimals.
std::string whole(double v) { return std::to_string(std::lround(v)); }

// Spread micro-batch hues by the golden angle, so neighbours (which sit next to each other in the
// picture) always get clearly different colours, however many there are.
double hue(int microbatch) { return std::fmod(microbatch * 137.508, 360.0); }

// F light, the backward halves darker: the microbatch is the hue, the kind the lightness.
int lightness(ActionKind k) {
  switch (k) {
    case ActionKind::forward: return 78;
    case ActionKind::backward: return 50;
    case ActionKind::backward_input: return 56;
    default: return 34;  // W
  }
}

const char* letter(ActionKind k) {
  switch (k) {
    case ActionKind::forward: return "F";
    case ActionKind::backward: return "B";
    case ActionKind::backward_input: return "I";
    default: return "W";
  }
}

std::string fill(int microbatch, ActionKind k) {
  return "hsl(" + fmt(hue(microbatch)) + ",70%," + std::to_string(lightness(k)) + "%)";
}

}  // namespace

namespace svg {

double document_width() { return kLeft + kPlotWidth + 30; }

// Title and subtitle above the rows; under them the axis ticks, their numbers and the word "time".
double panel_height(int ranks) { return kTop + ranks * (kRowHeight + kRowGap) + 50; }

double legend_height(int microbatches) {
  return 40 + 22 * ((microbatches + kSwatchesPerLine - 1) / kSwatchesPerLine) + 10;
}

void begin_document(std::ostream& os, double height) {
  const double width = document_width();
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\"" << fmt(height)
     << "\" viewBox=\"0 0 " << fmt(width) << " " << fmt(height) << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
     << "<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
        "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
        "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d0d0d0\" stroke-width=\"2\"/></pattern></defs>\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

std::string bubble_subtitle(const SimulationResult& result, const std::string& unit) {
  return "bubble fraction " + format_fixed(result.bubble_fraction, 4) + ", makespan " +
         format_significant(result.makespan, 4) + unit + " (hatched: idle)";
}

void draw_panel(std::ostream& os, const Schedule& schedule, const SimulationResult& result, const std::string& title,
                const std::string& subtitle, double top) {
  const int ranks = int(result.timeline.size());
  const double makespan = result.makespan > 0 ? result.makespan : 1;
  const double scale = kPlotWidth / makespan;
  const double rows_top = top + kTop;
  const double plot_bottom = rows_top + ranks * (kRowHeight + kRowGap);

  os << "<text x=\"" << fmt(kLeft) << "\" y=\"" << whole(top + 22) << "\" font-size=\"15\" font-weight=\"bold\">"
     << escape(title) << "</text>\n"
     << "<text x=\"" << fmt(kLeft) << "\" y=\"" << whole(top + 40) << "\">" << escape(subtitle) << "</text>\n";

  for (int r = 0; r < ranks; ++r) {
    const double y = rows_top + r * (kRowHeight + kRowGap);
    os << "<text x=\"" << fmt(kLeft - 10) << "\" y=\"" << fmt(y + kRowHeight / 2 + 4) << "\" text-anchor=\"end\">rank "
       << r << "</text>\n"
       << "<rect x=\"" << fmt(kLeft) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(kPlotWidth) << "\" height=\""
       << fmt(kRowHeight) << "\" fill=\"url(#idle)\"/>\n";
    for (const TimedAction& t : result.timeline[size_t(r)]) {
      if (!is_compute(t.action.kind) || !(t.end > t.start)) continue;
      const double x = kLeft + t.start * scale;
      const double w = (t.end - t.start) * scale;
      const Action& a = t.action;
      // The longest label that fits: "F3.1", "F3", then just "3".
      std::string label(letter(a.kind));
      label += std::to_string(a.microbatch);
      if (schedule.chunks() > 1 && w >= 7.0 * double(label.size() + 2)) {
        label += '.';
        label += std::to_string(a.chunk);
      }
      if (w < 7.0 * double(label.size())) label = std::to_string(a.microbatch);
      os << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(w) << "\" height=\""
         << fmt(kRowHeight) << "\" fill=\"" << fill(a.microbatch, a.kind)
         << "\" stroke=\"white\" stroke-width=\"0.75\"><title>" << escape(describe(a, r, schedule.layout))
         << " on rank " << r << ": " << format_significant(t.start, 4) << " to " << format_significant(t.end, 4)
         << "</title></rect>\n";
      if (w >= 7.0 * double(label.size())) {
        os << "<text x=\"" << fmt(x + w / 2) << "\" y=\"" << fmt(y + kRowHeight / 2 + 4)
           << "\" text-anchor=\"middle\" fill=\"" << (lightness(a.kind) > 52 ? "black" : "white") << "\">" << label
           << "</text>\n";
      }
    }
  }

  // Time axis.
  os << "<line x1=\"" << fmt(kLeft) << "\" y1=\"" << fmt(plot_bottom) << "\" x2=\"" << fmt(kLeft + kPlotWidth)
     << "\" y2=\"" << fmt(plot_bottom) << "\" stroke=\"black\"/>\n";
  const double step = tick_step(makespan, 10);
  for (int k = 0; k * step <= makespan * (1 + 1e-9); ++k) {
    const double x = kLeft + k * step * scale;
    os << "<line x1=\"" << fmt(x) << "\" y1=\"" << fmt(plot_bottom) << "\" x2=\"" << fmt(x) << "\" y2=\""
       << fmt(plot_bottom + 5) << "\" stroke=\"black\"/><text x=\"" << fmt(x) << "\" y=\"" << fmt(plot_bottom + 18)
       << "\" text-anchor=\"middle\">" << format_significant(k * step, 4) << "</text>\n";
  }
  os << "<text x=\"" << fmt(kLeft + kPlotWidth / 2) << "\" y=\"" << fmt(plot_bottom + 34)
     << "\" text-anchor=\"middle\">time</text>\n";
}

// The kinds (shades of one grey hue), the idle hatch, then one swatch per micro-batch.
void draw_legend(std::ostream& os, int microbatches, double top) {
  double x = kLeft;
  const ActionKind kinds[] = {ActionKind::forward, ActionKind::backward, ActionKind::backward_input,
                              ActionKind::backward_weight};
  const char* names[] = {"F forward", "B backward", "I input gradient", "W weight gradient"};
  for (int k = 0; k < 4; ++k) {
    os << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(top) << "\" width=\"14\" height=\"14\" fill=\"hsl(210,0%,"
       << lightness(kinds[k]) << "%)\"/><text x=\"" << fmt(x + 20) << "\" y=\"" << fmt(top + 11) << "\">" << names[k]
       << "</text>\n";
    x += 150;
  }
  os << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(top)
     << "\" width=\"14\" height=\"14\" fill=\"url(#idle)\" "
        "stroke=\"#ccc\"/><text x=\""
     << fmt(x + 20) << "\" y=\"" << fmt(top + 11) << "\">idle</text>\n";
  os << "<text x=\"" << fmt(kLeft) << "\" y=\"" << fmt(top + 34) << "\">micro-batches:</text>\n";
  for (int m = 0; m < microbatches; ++m) {
    const double sx = kLeft + 95 + (m % kSwatchesPerLine) * 45;
    const double sy = top + 24 + 22 * (m / kSwatchesPerLine);
    os << "<rect x=\"" << fmt(sx) << "\" y=\"" << fmt(sy) << "\" width=\"14\" height=\"14\" fill=\""
       << fill(m, ActionKind::backward) << "\"/><text x=\"" << fmt(sx + 18) << "\" y=\"" << fmt(sy + 11) << "\">" << m
       << "</text>\n";
  }
}

void end_document(std::ostream& os) { os << "</svg>\n"; }

}  // namespace svg

std::string timeline_svg(const Schedule& schedule, const SimulationResult& result) {
  const int ranks = int(result.timeline.size());
  const int M = schedule.microbatches;
  std::ostringstream title;
  title << schedule.name << ": P=" << schedule.ranks() << " ranks, M=" << M << " micro-batches, V="
        << schedule.chunks() << " chunk" << (schedule.chunks() == 1 ? "" : "s") << " per rank";

  std::ostringstream os;
  svg::begin_document(os, svg::panel_height(ranks) + svg::legend_height(M));
  svg::draw_panel(os, schedule, result, title.str(), svg::bubble_subtitle(result, " time units"), 0);
  svg::draw_legend(os, M, svg::panel_height(ranks));
  svg::end_document(os);
  return os.str();
}

void save_timeline_svg(const std::string& path, const Schedule& schedule, const SimulationResult& result) {
  write_file_atomically(path, timeline_svg(schedule, result), "save_timeline_svg");
}

}  // namespace brigade::pipeline
