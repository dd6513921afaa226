// Evicting whatever a CPU kernel left in the caches, before the next timed call.
//
// The flush READS a buffer twice the size of the last-level cache, on all of brigade's threads, rather
// than writing one: a write leaves about a cache's worth of dirty lines behind, and the timed kernel
// would then pay for writing them back to memory as it evicts them (the GPU's flush reads its buffer
// back for the same reason). A read leaves the caches full of clean lines of the flush buffer, and
// the dirty lines of the previous call (its output) are written back during the flush, outside the
// timing. Reading on every thread also clears each core's private L2, not just the shared cache.
#pragma once

#include <cstddef>
#include <memory>

namespace brigade::bench {

class CacheFlush {
 public:
  // A buffer of `bytes`, written once here so its pages are real (a never-written page is the shared
  // zero page, which reads without evicting anything).
  explicit CacheFlush(size_t bytes);
  // Reads the whole buffer.
  void run();
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  std::unique_ptr<unsigned char[]> buffer_;
};

// The flush every CPU timing shares, sized from the host's last-level cache (bench/cpu_info.h);
// created on first use and kept for the process's life.
CacheFlush& shared_cache_flush();

}  // namespace brigade::bench
