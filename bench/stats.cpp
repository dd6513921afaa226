#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace brigade::bench {

double quantile(std::vector<double> samples, double q) {
  BRIGADE_CHECK(!samples.empty(), "quantile: no samples");
  BRIGADE_CHECK(q >= 0 && q <= 1, "quantile: q must be in [0, 1], got ", q);
  std::sort(samples.begin(), samples.end());
  const double pos = q * double(samples.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
  return samples[lo] + (samples[hi] - samples[lo]) * (pos - double(lo));
}

Summary summarize(std::vector<double> samples) {
  BRIGADE_CHECK(!samples.empty(), "summarize: no samples");
  Summary s;
  s.count = samples.size();
  s.median = quantile(samples, 0.5);
  auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  s.min = *lo;
  s.max = *hi;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / double(samples.size());
  return s;
}

}  // namespace brigade::bench
