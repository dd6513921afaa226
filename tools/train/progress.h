// The text `brigade train` prints: progress lines and durations.
#pragma once

#include <cstdint>
#include <string>

namespace brigade::train {

// "42s", "1m05s", "2h03m": short and fixed-format, for the eta column.
std::string format_duration(double seconds);

struct StepReport {
  int64_t step = 0;   // steps done so far (1-based)
  int64_t steps = 0;  // steps in the whole run
  double loss = 0;
  double lr = 0;
  double tokens_per_second = 0;
  double eta_seconds = 0;
  double mfu = -1;  // model FLOPs utilisation (mfu.h); negative: not shown
};

// "step   40/300  loss=1.2345  lr=9.8e-04  tok/s=12345  mfu=31.2%  eta=1m05s" (mfu when known)
std::string format_step(const StepReport& r);

}  // namespace brigade::train
