// CUDA kernels: the index scan. Each block counts its indices and finds its first bad position; the
// blocks then merge into two integers with atomicAdd and atomicMin — integer atomics, whose result
// does not depend on the order they land in.
#include <climits>

#include "core/cuda/capture.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace brigade::cuda {
namespace {

struct ScanCounters {
  unsigned long long counted;
  unsigned long long first_bad;  // ULLONG_MAX: none
};

__global__ void scan_indices_kernel(const int64_t* indices, int64_t n, int64_t limit, bool has_ignore, int64_t ignore,
                                    ScanCounters* out) {
  unsigned long long counted = 0, first_bad = ULLONG_MAX;
  BRIGADE_GRID_STRIDE_LOOP(i, n, int64_t) {
    const int64_t v = indices[i];
    if (has_ignore && v == ignore) continue;
    ++counted;
    if ((v < 0 || v >= limit) && (unsigned long long)i < first_bad) first_bad = (unsigned long long)i;
  }
  counted = block_reduce(counted, Sum{}, 0ull);
  first_bad = block_reduce(first_bad, Min{}, ULLONG_MAX);
  if (threadIdx.x == 0) {
    if (counted) atomicAdd(&out->counted, counted);
    if (first_bad != ULLONG_MAX) atomicMin(&out->first_bad, first_bad);
  }
}

// Stops the kernel when the scan found a bad index: inside a graph nothing on the host can look.
__global__ void trap_on_bad_index_kernel(const ScanCounters* counters) {
  if (counters->first_bad != ULLONG_MAX) __trap();
}

}  // namespace

void scan_indices(IndexScan& result, const Tensor& indices, int64_t limit, std::optional<int64_t> ignore_index) {
  result = IndexScan{};
  const int64_t n = indices.numel();
  if (n == 0) return;
  const Device device = indices.device();
  cudaStream_t stream = stream_for(indices);
  const Tensor memory = scratch(device, sizeof(ScanCounters));
  auto* counters = static_cast<ScanCounters*>(memory.raw_data());
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(&counters->counted, 0, sizeof(counters->counted), stream));
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(&counters->first_bad, 0xff, sizeof(counters->first_bad), stream));
  const auto* p = indices.data<int64_t>();
  scan_indices_kernel<<<grid_for(n, device), kThreads, 0, stream>>>(p, n, limit, ignore_index.has_value(),
                                                                     ignore_index.value_or(0), counters);
  BRIGADE_CUDA_CHECK_LAUNCH();
  if (is_capturing(stream)) {  // no waiting for the answer: it stays on the device (index_scan.h)
    trap_on_bad_index_kernel<<<1, 1, 0, stream>>>(counters);
    BRIGADE_CUDA_CHECK_LAUNCH();
    result.counted = -1;
    result.device_counts = memory;
    return;
  }

  ScanCounters found;
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(&found, counters, sizeof(found), cudaMemcpyDeviceToHost, stream));
  BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  result.counted = int64_t(found.counted);
  if (found.first_bad != ULLONG_MAX) {  // the error path: fetch the offending value for the message
    result.bad_position = int64_t(found.first_bad);
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(&result.bad_value, p + result.bad_position, sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, stream));
    BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

}  // namespace brigade::cuda
