#include "optim/schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace brigade::optim {

double CosineSchedule::lr(int64_t step) const {
  BRIGADE_CHECK(warmup_steps >= 0 && total_steps >= warmup_steps, "CosineSchedule: need 0 <= warmup_steps <= total_steps, got ",
                warmup_steps, " and ", total_steps);
  BRIGADE_CHECK(std::isfinite(base_lr) && std::isfinite(min_lr) && min_lr >= 0 && min_lr <= base_lr,
                "CosineSchedule: need 0 <= min_lr <= base_lr, got min_lr ", min_lr, " and base_lr ", base_lr);
  BRIGADE_CHECK(step >= 0, "CosineSchedule: step must be >= 0, got ", step);
  if (step < warmup_steps) return base_lr * double(step + 1) / double(warmup_steps);
  if (step >= total_steps) return min_lr;
  const double progress = double(step - warmup_steps) / double(total_steps - warmup_steps);  // in [0, 1)
  return min_lr + (base_lr - min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace brigade::optim
