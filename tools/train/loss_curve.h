// The loss curves of a run as an SVG picture, drawn from its metrics records (metrics.h): training
// and validation loss over steps above, tokens per second over steps below. `brigade train --metrics`
// writes it at the end of the run (--curves, beside the timeline), and `brigade curves` redraws it
// from a metrics file — the same records give the same picture, byte for byte.
//
// Each panel is a <g id="loss"> / <g id="throughput"> with its series as <polyline class="..."> (class
// "training", "validation", "tokens-per-second"), points in step order, and its y-axis ticks as
// <g class="y-tick"> (a line at the tick's height and the value as text), so a reader can map a point
// back to its value; the x axis likewise (<g class="x-tick">, steps).
#pragma once

#include <string>
#include <vector>

#include "metrics.h"

namespace brigade::train {

std::string loss_curve_svg(const std::vector<MetricsRecord>& records);

// Writes loss_curve_svg() to `path` atomically. Throws Error naming the path when it cannot.
void save_loss_curve(const std::string& path, const std::vector<MetricsRecord>& records);

}  // namespace brigade::train
