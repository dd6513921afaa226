// What every brigade picture spells the same way: escaped text, coordinates, axis ticks. The
// pipeline's timelines (timeline_svg.cpp) and `brigade train`'s loss curves (tools/train/loss_curve.cpp)
// are drawn with these. Internal to the build; not installed.
#pragma once

#include <string>

namespace brigade::pipeline::svg {

// `text` with <, >, & and " escaped, for an element's text or an attribute's value.
std::string escape(const std::string& text);

// A coordinate to a tenth of a unit: finer than any screen shows, and short files.
std::string coordinate(double v);

// A round tick spacing (1, 2 or 5 times a power of ten) giving about `target` ticks over `span` (> 0).
double tick_step(double span, int target);

}  // namespace brigade::pipeline::svg
