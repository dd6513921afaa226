// Plain SVG 1.1 as the timelines are (pipeline/analysis/svg.h spells text, coordinates and ticks the
// same way): any browser or image viewer shows it.
#include "loss_curve.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/atomic_file.h"
#include "core/format.h"
#include "pipeline/analysis/svg.h"

namespace brigade::train {

namespace {

namespace svg = pipeline::svg;

constexpr double kLeft = 80;  // room for the y-axis numbers
constexpr double kPlotWidth = 1000;
constexpr double kPlotHeight = 260;
constexpr double kPanelTop = 60;  // title and legend above the plot
constexpr double kPanelHeight = kPanelTop + kPlotHeight + 50;  // the x axis and its label below

struct Series {
  const char* css_class;
  const char* colour;
  const char* label;
  bool markers;  // a dot per point: validations are few, and one alone draws no line
  std::vector<std::pair<double, double>> points;  // (step, value), in step order
};

// The range an axis shows: `lo` and `hi` rounded out to whole ticks, never empty.
struct Axis {
  double lo = 0, hi = 1, step = 1;
};
Axis axis_over(double lo, double hi, int ticks) {
  if (!(hi > lo)) {  // one value (or none): a unit-wide range around it
    lo = std::isfinite(lo) ? lo - 0.5 : 0;
    hi = lo + 1;
  }
  Axis a;
  a.step = svg::tick_step(hi - lo, ticks);
  a.lo = std::floor(lo / a.step) * a.step;
  a.hi = std::ceil(hi / a.step) * a.step;
  return a;
}

class Panel {
 public:
  Panel(std::ostream& os, double top, const Axis& x, const Axis& y) : os_(os), top_(top), x_(x), y_(y) {}

  double x(double step) const { return kLeft + (step - x_.lo) / (x_.hi - x_.lo) * kPlotWidth; }
  double y(double value) const { return top_ + kPanelTop + kPlotHeight * (1 - (value - y_.lo) / (y_.hi - y_.lo)); }

  void axes(const std::string& x_label) {
    const double bottom = top_ + kPanelTop + kPlotHeight;
    os_ << "<rect x=\"" << svg::coordinate(kLeft) << "\" y=\"" << svg::coordinate(top_ + kPanelTop) << "\" width=\""
        << svg::coordinate(kPlotWidth) << "\" height=\"" << svg::coordinate(kPlotHeight)
        << "\" fill=\"none\" stroke=\"black\"/>\n";
    // k * step rather than repeated addition, so the last tick lands on hi exactly.
    for (int k = 0; y_.lo + k * y_.step <= y_.hi * (1 + 1e-12) + 1e-12; ++k) {
      const double v = y_.lo + k * y_.step;
      os_ << "<g class=\"y-tick\"><line x1=\"" << svg::coordinate(kLeft - 5) << "\" y1=\"" << svg::coordinate(y(v))
          << "\" x2=\"" << svg::coordinate(kLeft + kPlotWidth) << "\" y2=\"" << svg::coordinate(y(v))
          << "\" stroke=\"#e4e4e4\"/><text x=\"" << svg::coordinate(kLeft - 8) << "\" y=\""
          << svg::coordinate(y(v) + 4) << "\" text-anchor=\"end\">" << format_significant(v, 6) << "</text></g>\n";
    }
    for (int k = 0; x_.lo + k * x_.step <= x_.hi * (1 + 1e-12) + 1e-12; ++k) {
      const double s = x_.lo + k * x_.step;
      os_ << "<g class=\"x-tick\"><line x1=\"" << svg::coordinate(x(s)) << "\" y1=\"" << svg::coordinate(bottom)
          << "\" x2=\"" << svg::coordinate(x(s)) << "\" y2=\"" << svg::coordinate(bottom + 5)
          << "\" stroke=\"black\"/><text x=\"" << svg::coordinate(x(s)) << "\" y=\"" << svg::coordinate(bottom + 18)
          << "\" text-anchor=\"middle\">" << format_significant(s, 8) << "</text></g>\n";
    }
    os_ << "<text x=\"" << svg::coordinate(kLeft + kPlotWidth / 2) << "\" y=\"" << svg::coordinate(bottom + 36)
        << "\" text-anchor=\"middle\">" << svg::escape(x_label) << "</text>\n";
  }

  void series(const Series& s) {
    if (s.points.empty()) return;
    os_ << "<polyline class=\"" << s.css_class << "\" fill=\"none\" stroke=\"" << s.colour
        << "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < s.points.size(); ++i)
      os_ << (i > 0 ? " " : "") << svg::coordinate(x(s.points[i].first)) << "," << svg::coordinate(y(s.points[i].second));
    os_ << "\"/>\n";
    if (s.markers)
      for (const auto& [step, v] : s.points)
        os_ << "<circle cx=\"" << svg::coordinate(x(step)) << "\" cy=\"" << svg::coordinate(y(v)) << "\" r=\"3\" fill=\""
            << s.colour << "\"/>\n";
  }

  // The title, and a swatch and label per series along the top.
  void heading(const std::string& title, const std::vector<const Series*>& series) {
    os_ << "<text x=\"" << svg::coordinate(kLeft) << "\" y=\"" << svg::coordinate(top_ + 22)
        << "\" font-size=\"15\" font-weight=\"bold\">" << svg::escape(title) << "</text>\n";
    double x = kLeft;
    for (const Series* s : series) {
      os_ << "<rect x=\"" << svg::coordinate(x) << "\" y=\"" << svg::coordinate(top_ + 34) << "\" width=\"14\" height=\"4\" fill=\""
          << s->colour << "\"/><text x=\"" << svg::coordinate(x + 20) << "\" y=\"" << svg::coordinate(top_ + 40) << "\">"
          << svg::escape(s->label) << "</text>\n";
      x += 330;
    }
  }

 private:
  std::ostream& os_;
  double top_;
  Axis x_, y_;
};

Axis value_axis(const std::vector<const Series*>& series) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series* s : series)
    for (const auto& [step, v] : s->points) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  return axis_over(lo, hi, 6);
}

}  // namespace

std::string loss_curve_svg(const std::vector<MetricsRecord>& records) {
  Series training{"training", "#1f77b4", "training loss (mean since the previous progress line)", false, {}};
  Series validation{"validation", "#ff7f0e", "validation loss", true, {}};
  Series throughput{"tokens-per-second", "#2ca02c", "tokens per second (since the previous progress line)", false, {}};
  double first = INFINITY, last = -INFINITY;
  for (const MetricsRecord& r : records) {
    first = std::min(first, double(r.step));
    last = std::max(last, double(r.step));
    if (!std::isnan(r.loss)) training.points.emplace_back(double(r.step), r.loss);
    if (!std::isnan(r.validation_loss)) validation.points.emplace_back(double(r.step), r.validation_loss);
    if (!std::isnan(r.tokens_per_second)) throughput.points.emplace_back(double(r.step), r.tokens_per_second);
  }
  const Axis steps = axis_over(first, last, 10);
  const double width = kLeft + kPlotWidth + 40, height = 2 * kPanelHeight;

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg::coordinate(width) << "\" height=\""
     << svg::coordinate(height) << "\" viewBox=\"0 0 " << svg::coordinate(width) << " " << svg::coordinate(height)
     << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<g id=\"loss\">\n";
  Panel loss(os, 0, steps, value_axis({&training, &validation}));
  loss.heading("loss", {&training, &validation});
  loss.axes("step");
  loss.series(training);
  loss.series(validation);
  os << "</g>\n<g id=\"throughput\">\n";
  Panel speed(os, kPanelHeight, steps, value_axis({&throughput}));
  speed.heading("throughput", {&throughput});
  speed.axes("step");
  speed.series(throughput);
  os << "</g>\n</svg>\n";
  return os.str();
}

void save_loss_curve(const std::string& path, const std::vector<MetricsRecord>& records) {
  write_file_atomically(path, loss_curve_svg(records), "save_loss_curve");
}

}  // namespace brigade::train
