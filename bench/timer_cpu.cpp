#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/cache_flush.h"
#include "bench/timer.h"

namespace brigade::bench {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

}  // namespace

Summary time_cpu(const std::function<void()>& run, const TimingOptions& options) {
  for (int i = 0; i < options.warmup; ++i) run();
  CacheFlush* flush = options.flush_cache ? &shared_cache_flush() : nullptr;

  // One timed call (after the warm-up) and one flush tell how many repeats fit in the budget.
  auto start = Clock::now();
  if (flush) flush->run();
  const auto flushed = Clock::now();
  run();
  const auto done = Clock::now();
  const double estimate_ms = std::max(elapsed_ms(start, done), 1e-3);
  const int repeats = std::clamp(int(options.budget_ms / estimate_ms), options.min_repeats, options.max_repeats);

  std::vector<double> samples = {elapsed_ms(flushed, done)};
  for (int i = 1; i < repeats; ++i) {
    if (flush) flush->run();
    start = Clock::now();
    run();
    samples.push_back(elapsed_ms(start, Clock::now()));
  }
  return summarize(samples);
}

}  // namespace brigade::bench
