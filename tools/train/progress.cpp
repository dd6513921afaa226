#include "progress.h"

#include <cmath>
#include <cstdio>

namespace brigade::train {

std::string format_duration(double seconds) {
  int64_t s = std::isfinite(seconds) && seconds > 0 ? int64_t(std::llround(seconds)) : 0;
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  }
  return buf;
}

std::string format_step(const StepReport& r) {
  // Pad the step to the width of the total so the columns line up over the whole run.
  int width = int(std::to_string(r.steps).size());
  char mfu[32] = "";
  if (r.mfu >= 0) std::snprintf(mfu, sizeof mfu, "  mfu=%.1f%%", 100.0 * r.mfu);
  char buf[192];
  std::snprintf(buf, sizeof buf, "step %*lld/%lld  loss=%.4f  lr=%.1e  tok/s=%.0f%s  eta=%s", width, (long long)r.step,
                (long long)r.steps, r.loss, r.lr, r.tokens_per_second, mfu, format_duration(r.eta_seconds).c_str());
  return buf;
}

}  // namespace brigade::train
