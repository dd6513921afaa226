// Summary statistics of repeated timings.
//
// A benchmark reports the MEDIAN of many runs: one run is noise (clock ramp-up, another process, a
// page fault), and the mean is pulled by outliers, while the median of 50 runs of a kernel on a quiet
// GPU is stable to about a percent. min and max are kept to show the spread.
#pragma once

#include <cstddef>
#include <vector>

namespace brigade::bench {

struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  size_t count = 0;
};

// Throws brigade::Error for an empty sample (there is nothing to summarise).
Summary summarize(std::vector<double> samples);

// The q-quantile (0 <= q <= 1) with linear interpolation between neighbours: quantile(s, 0.5) is the
// median, which for an even count is the mean of the two middle values.
double quantile(std::vector<double> samples, double q);

}  // namespace brigade::bench
