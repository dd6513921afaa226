// The SVG picture of a simulated schedule (see timeline.h): plain SVG 1.1, no scripts, no fonts
// beyond the generic sans-serif, so any browser or image viewer shows it.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "pipeline/timeline.h"

namespace brigade::pipeline {

namespace {

constexpr double kLeft = 80;  // room for the row labels
constexpr double kTop = 50;   // room for the title
constexpr double kPlotWidth = 1000;
constexpr double kRowHeight = 28;
constexpr double kRowGap = 6;

std::string fmt(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << v;
  return os.str();
}

std::string number(double v) {
  std::ostringstream os;
  os << std::setprecision(4) << v;
  return os.str();
}

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

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A round tick spacing (1, 2 or 5 times a power of ten) giving about `target` ticks.
double tick_step(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::string timeline_svg(const Schedule& schedule, const SimulationResult& result) {
  const int ranks = int(result.timeline.size());
  const double makespan = result.makespan > 0 ? result.makespan : 1;
  const double scale = kPlotWidth / makespan;
  const double plot_bottom = kTop + ranks * (kRowHeight + kRowGap);
  const int M = schedule.microbatches;
  const int swatches_per_line = 20;
  const double legend_top = plot_bottom + 50;
  const double height = legend_top + 40 + 22 * ((M + swatches_per_line - 1) / swatches_per_line) + 10;
  const double width = kLeft + kPlotWidth + 30;

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\"" << fmt(height)
     << "\" viewBox=\"0 0 " << fmt(width) << " " << fmt(height) << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
     << "<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
        "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
        "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d0d0d0\" stroke-width=\"2\"/></pattern></defs>\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";

  os << "<text x=\"" << fmt(kLeft) << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" << escape(schedule.name)
     << ": P=" << schedule.ranks() << " ranks, M=" << M << " micro-batches, V=" << schedule.chunks() << " chunk"
     << (schedule.chunks() == 1 ? "" : "s") << " per rank</text>\n"
     << "<text x=\"" << fmt(kLeft) << "\" y=\"40\">bubble fraction " << std::fixed << std::setprecision(4)
     << result.bubble_fraction << std::defaultfloat << ", makespan " << number(result.makespan)
     << " time units (hatched: idle)</text>\n";

  for (int r = 0; r < ranks; ++r) {
    const double y = kTop + r * (kRowHeight + kRowGap);
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
         << " on rank " << r << ": " << number(t.start) << " to " << number(t.end) << "</title></rect>\n";
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
       << "\" text-anchor=\"middle\">" << number(k * step) << "</text>\n";
  }
  os << "<text x=\"" << fmt(kLeft + kPlotWidth / 2) << "\" y=\"" << fmt(plot_bottom + 34)
     << "\" text-anchor=\"middle\">time</text>\n";

  // Legend: the kinds (shades of one grey hue), then one swatch per micro-batch.
  double x = kLeft;
  const ActionKind kinds[] = {ActionKind::forward, ActionKind::backward, ActionKind::backward_input,
                              ActionKind::backward_weight};
  const char* names[] = {"F forward", "B backward", "I input gradient", "W weight gradient"};
  for (int k = 0; k < 4; ++k) {
    os << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(legend_top) << "\" width=\"14\" height=\"14\" fill=\"hsl(210,0%,"
       << lightness(kinds[k]) << "%)\"/><text x=\"" << fmt(x + 20) << "\" y=\"" << fmt(legend_top + 11) << "\">"
       << names[k] << "</text>\n";
    x += 150;
  }
  os << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(legend_top)
     << "\" width=\"14\" height=\"14\" fill=\"url(#idle)\" "
        "stroke=\"#ccc\"/><text x=\""
     << fmt(x + 20) << "\" y=\"" << fmt(legend_top + 11) << "\">idle</text>\n";
  os << "<text x=\"" << fmt(kLeft) << "\" y=\"" << fmt(legend_top + 34) << "\">micro-batches:</text>\n";
  for (int m = 0; m < M; ++m) {
    const double sx = kLeft + 95 + (m % swatches_per_line) * 45;
    const double sy = legend_top + 24 + 22 * (m / swatches_per_line);
    os << "<rect x=\"" << fmt(sx) << "\" y=\"" << fmt(sy) << "\" width=\"14\" height=\"14\" fill=\""
       << fill(m, ActionKind::backward) << "\"/><text x=\"" << fmt(sx + 18) << "\" y=\"" << fmt(sy + 11) << "\">" << m
       << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

void save_timeline_svg(const std::string& path, const Schedule& schedule, const SimulationResult& result) {
  const std::string svg = timeline_svg(schedule, result);
  // The temporary name is unique per process and call, and sits next to the target so that the
  // rename stays on one file system (where it is atomic).
  static std::atomic<unsigned> counter{0};
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    BRIGADE_CHECK(out.good(), "save_timeline_svg: cannot create '", temp, "': ", std::strerror(errno));
    out << svg;
    out.flush();
    if (!out.good()) {
      out.close();
      std::remove(temp.c_str());
      fail("save_timeline_svg: cannot write '", temp, "'");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    fail("save_timeline_svg: cannot rename '", temp, "' to '", path, "': ", why);
  }
}

}  // namespace brigade::pipeline
