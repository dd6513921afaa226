// CosineSchedule: linear warm-up, then half a cosine down to a floor — the usual schedule for
// training transformers. Warm-up keeps the first updates small while AdamW's second-moment estimates
// are still noisy; the slow decay lets the model settle at the end.
//
//   CosineSchedule schedule{.base_lr = 3e-4, .warmup_steps = 100, .total_steps = 2000, .min_lr = 3e-5};
//   for (int64_t step = 0; step < 2000; ++step) { opt.set_lr(schedule.lr(step)); ...; opt.step(); }
#pragma once

#include <cstdint>

namespace brigade::optim {

struct CosineSchedule {
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr = 0;

  // The learning rate for update number `step` (0 for the first update):
  //   step <  W:      base_lr * (step + 1) / W        rises linearly, reaching base_lr at step W - 1
  //   W <= step <= T: min_lr + (base_lr - min_lr) * (1 + cos(pi * (step - W) / (T - W))) / 2
  //   step >  T:      min_lr
  // with W = warmup_steps and T = total_steps. Throws on a negative step or inconsistent settings.
  double lr(int64_t step) const;
};

}  // namespace brigade::optim
