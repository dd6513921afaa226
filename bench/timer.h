// Timing GPU work: warm-up, CUDA events on the current stream, many repeats, L2 flushed in between.
//
// Why each piece is there:
//  - warm-up: the first call pays for lazy set-up (cuBLAS handles, cuDNN plans, allocator growth,
//    module loading) that a training step never sees again;
//  - events on the stream, not a host clock: they time what the GPU did, not how long the host took
//    to enqueue it, and need no device-wide synchronisation;
//  - all repeats are enqueued back to back and read after one synchronisation, so the GPU is never
//    idle waiting for the host between a start event and the kernel it brackets;
//  - the L2 cache (50-60 MB on an H100/H200) is overwritten before each repeat, so a kernel whose
//    inputs fit in L2 is not credited with bandwidth it would never see in a real step.
#pragma once

#if BRIGADE_HAVE_CUDA

#include <functional>

#include "bench/stats.h"
#include "core/device.h"

namespace brigade::bench {

struct TimingOptions {
  int warmup = 3;
  int min_repeats = 10;
  int max_repeats = 200;
  double budget_ms = 500;  // GPU time to spend on repeats, beyond min_repeats
  bool flush_l2 = true;
};

// Times `run`, which must enqueue its GPU work on the current stream of `device` (every brigade op
// does). Returns milliseconds per call over the repeats.
Summary time_gpu(Device device, const std::function<void()>& run, const TimingOptions& options);

}  // namespace brigade::bench

#endif  // BRIGADE_HAVE_CUDA
