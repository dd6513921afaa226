// parallel_for: split a range over a small pool of worker threads (the CPU kernels' only threading).
//
// One call at a time owns the pool; a call that finds it busy (another pipeline stage thread, or a
// nested call from inside a worker) simply runs its range on the calling thread. That keeps results
// independent of timing: each index is always processed by exactly one body call, and kernels only
// parallelise over outputs, never over a reduction, so the numbers are the same for any thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace brigade {

// Calls body(begin, end) on disjoint chunks covering [0, n). Chunks hold at least `grain` indices.
// If a chunk throws, the first exception is rethrown once every chunk has finished.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& body);

// Threads used per call (default: hardware threads, or BRIGADE_NUM_THREADS). 1 disables threading.
// The pool is created on first use with the default count; set_num_threads can lower the count used
// afterwards but not raise it beyond the pool's size.
int num_threads();
void set_num_threads(int n);

}  // namespace brigade
