#include "bench/cache_flush.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "bench/cpu_info.h"
#include "core/parallel.h"

namespace brigade::bench {
namespace {

// Where the sum of the read words goes, so the compiler cannot drop the reads.
volatile uint64_t g_sink = 0;

}  // namespace

CacheFlush::CacheFlush(size_t bytes) : bytes_(bytes / 64 * 64), buffer_(new unsigned char[bytes / 64 * 64]) {
  // Filled on all threads, like a kernel's output: each page lands on the memory node of a thread
  // that will read it.
  parallel_for(int64_t(bytes_), int64_t(1) << 20, [&](int64_t begin, int64_t end) {
    std::memset(buffer_.get() + begin, 0x5a, size_t(end - begin));
  });
}

void CacheFlush::run() {
  const int64_t words = int64_t(bytes_ / 8);
  parallel_for(words, int64_t(1) << 16, [&](int64_t begin, int64_t end) {
    uint64_t sum = 0;
    for (int64_t i = begin; i < end; ++i) {
      uint64_t word;
      std::memcpy(&word, buffer_.get() + i * 8, 8);
      sum += word;
    }
    g_sink = g_sink + sum;
  });
}

CacheFlush& shared_cache_flush() {
  // Twice the last-level cache (and at least 16 MiB): with the replacement policy not strictly LRU,
  // one cache's worth of reads leaves some old lines in place.
  static CacheFlush flush(std::max<size_t>(2 * describe_cpu().llc_bytes, size_t(16) << 20));
  return flush;
}

}  // namespace brigade::bench
