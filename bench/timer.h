// Timing kernels: warm-up, many repeats, the caches overwritten in between, the median reported.
//
// Why each piece is there:
//  - warm-up: the first call pays for lazy set-up (cuBLAS handles, cuDNN plans, allocator growth,
//    module loading, the first touch of fresh pages) that a training step never sees again;
//  - the cache overwritten before each repeat (the L2 of a GPU, 50-60 MB on an H100/H200; the
//    last-level cache of a CPU), so a kernel whose inputs fit in it is not credited with bandwidth it
//    would never see in a real step, where other layers' tensors pass through the cache in between.
// On a GPU (time_gpu): CUDA events on the current stream, not a host clock: they time what the GPU
// did, not how long the host took to enqueue it; all repeats are enqueued back to back and read after
// one synchronisation, so the GPU is never idle waiting for the host between a start event and the
// kernel it brackets.
// On the CPU (time_cpu): the host's steady_clock around each call, which runs the kernel to the end
// on brigade's threads (core/parallel.h) before it returns.
#pragma once

#include "bench/gpu.h"

#include <functional>

#include "bench/stats.h"
#include "core/device.h"

namespace brigade::bench {

struct TimingOptions {
  int warmup = 3;
  int min_repeats = 10;
  int max_repeats = 200;
  // Time to spend on repeats, beyond min_repeats: GPU time on a GPU; on the CPU, wall time including
  // the cache flush before each repeat (which the host pays for there).
  double budget_ms = 500;
  bool flush_cache = true;
};

// Times `run` on `device`: time_cpu for the CPU, time_gpu for a GPU (an error in a build without CUDA).
Summary time_on(Device device, const std::function<void()>& run, const TimingOptions& options);

// Times `run`, a call that does its work on the calling thread and brigade's thread pool. Returns
// milliseconds per call over the repeats.
Summary time_cpu(const std::function<void()>& run, const TimingOptions& options);

#if BRIGADE_BENCH_GPU
// Times `run`, which must enqueue its GPU work on the current stream of `device` (every brigade op
// does). Returns milliseconds per call over the repeats.
Summary time_gpu(Device device, const std::function<void()>& run, const TimingOptions& options);
#endif

}  // namespace brigade::bench
