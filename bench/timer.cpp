#include "bench/timer.h"

#include "core/error.h"

namespace brigade::bench {

Summary time_on(Device device, const std::function<void()>& run, const TimingOptions& options) {
  if (device.is_cpu()) return time_cpu(run, options);
#if BRIGADE_BENCH_GPU
  return time_gpu(device, run, options);
#else
  throw Error("bench: cannot time on " + device.str() + ": this build has no CUDA backend");
#endif
}

}  // namespace brigade::bench
