#include "bench/timer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "core/cuda/check.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/ops.h"

namespace brigade::bench {
namespace {

// A buffer twice the size of L2, rewritten before each repeat so nothing a kernel reads is cached —
// then read back once, so that what L2 holds when the timed kernel starts is clean: after the write
// alone, about one L2 of dirty lines would still wait to be written back, and the timed kernel would
// pay for that (~10 us on an H200, as long as a whole 1024^3 bf16 GEMM).
class L2Flush {
 public:
  explicit L2Flush(Device device) {
    int l2_bytes = 0;
    BRIGADE_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device.index));
    bytes_ = std::max<size_t>(2 * size_t(l2_bytes), size_t(64) << 20);
    buffer_ = empty({int64_t(bytes_ / 4)}, DType::f32, device);  // f32: the read-back is a sum
  }
  void enqueue(cudaStream_t stream) {
    BRIGADE_CUDA_CHECK(cudaMemsetAsync(buffer_.raw_data(), ++value_, bytes_, stream));
    // A reduction reads every byte (on the current stream, which `stream` is: see time_gpu).
    ops::sum(buffer_, {}, false);
  }

 private:
  Tensor buffer_;
  size_t bytes_ = 0;
  unsigned char value_ = 0;
};

}  // namespace

Summary time_gpu(Device device, const std::function<void()>& run, const TimingOptions& options) {
  const Stream stream = current_stream(device);
  const auto raw = static_cast<cudaStream_t>(stream.raw());
  for (int i = 0; i < options.warmup; ++i) run();

  // One timed call (after the warm-up) tells how many repeats fit in the budget.
  const Event first = Event::create(device, true), last = Event::create(device, true);
  first.record(stream);
  run();
  last.record(stream);
  last.synchronize();
  const double estimate_ms = std::max(first.elapsed_ms(last), 1e-3);
  const int repeats = std::clamp(int(options.budget_ms / estimate_ms), options.min_repeats, options.max_repeats);

  L2Flush flush(device);
  std::vector<Event> starts, ends;
  for (int i = 0; i < repeats; ++i) {
    starts.push_back(Event::create(device, true));
    ends.push_back(Event::create(device, true));
  }
  for (int i = 0; i < repeats; ++i) {
    if (options.flush_cache) flush.enqueue(raw);
    starts[size_t(i)].record(stream);
    run();
    ends[size_t(i)].record(stream);
  }
  ends.back().synchronize();
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) samples.push_back(starts[size_t(i)].elapsed_ms(ends[size_t(i)]));
  return summarize(samples);
}

}  // namespace brigade::bench
