// The CPU's copy ceiling (the FMA peak has its own file, bench/fma_peak.cpp).
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include "bench/ceilings.h"
#include "core/error.h"
#include "core/parallel.h"

namespace brigade::bench {

Throughput cpu_copy_bandwidth(size_t bytes, const TimingOptions& options) {
  BRIGADE_CHECK(bytes >= 4096, "cpu_copy_bandwidth: a buffer of at least 4096 bytes, got ", bytes);
  const std::unique_ptr<unsigned char[]> src(new unsigned char[bytes]), dst(new unsigned char[bytes]);
  // One slice per thread, as brigade's kernels split their work. Both buffers are written first, on the
  // threads that will copy them, so no page is first touched (and zero-filled) inside the timing.
  const int64_t threads = num_threads();
  const int64_t per = (int64_t(bytes) + threads - 1) / threads;
  auto for_each_slice = [&](const std::function<void(size_t, size_t)>& body) {
    parallel_for(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const size_t from = size_t(t * per), to = std::min(bytes, size_t((t + 1) * per));
        if (from < to) body(from, to - from);
      }
    });
  };
  for_each_slice([&](size_t at, size_t n) {
    for (size_t i = 0; i < n; ++i) src[at + i] = static_cast<unsigned char>((at + i) * 2654435761u >> 24);
    std::memset(dst.get() + at, 0, n);
  });
  Throughput t;
  TimingOptions no_flush = options;
  no_flush.flush_cache = false;  // the buffers are far larger than the caches already
  t.time_ms = time_cpu([&] { for_each_slice([&](size_t at, size_t n) { std::memcpy(dst.get() + at, src.get() + at, n); }); },
                       no_flush);
  t.value = 2.0 * double(bytes) / (t.time_ms.median * 1e-3) / 1e9;
  return t;
}

}  // namespace brigade::bench
