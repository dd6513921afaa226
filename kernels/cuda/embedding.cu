// CUDA kernels: embedding forward (a row gather) and backward (a deterministic scatter-add).
//
// Forward: one warp per looked-up row copies it in the widest unit that divides the row and both
// addresses (16 bytes when it can) — a lookup only moves bytes.
//
// Backward: many positions can name the same row (a token repeated in a batch). Adding them with
// float atomics would make the low bits depend on which thread got there first. Instead:
//   1. sort the (index, position) pairs by index with CUB's radix sort — stable, so each row's
//      positions stay in increasing order;
//   2. find where each row's run of positions starts (a binary search per row);
//   3. give every row of grad_weight to one warp, which adds its run in order, 16 bytes of columns
//      per lane per load (8 bf16, 4 f32) when the row width allows, one column otherwise.
// The sums therefore run in the CPU reference's order: f32 results match it bit for bit, and every
// dtype's results are the same on every run (no atomics, nothing depends on timing).
//
// Why fast: no atomics, so no contention however often a token repeats; each grad_y row is read
// once, as whole 16-byte vectors, and each grad_weight row written once, rows nobody looked up
// included (as zeros) — the op's minimum traffic. Step 3 had a block per row and one element per
// thread, 17-36% of the copy bandwidth on an H200; expected now 60-80% at GPT-2's [50304, 768] with
// 16K tokens (unmeasured yet; `brigade bench kernels` has the row). Limits: the sort (two passes of
// CUB's radix sort over the ids) and the binary searches are fixed costs that 16K tokens do not
// amortise, and a row hit by thousands of positions is one warp's serial chain (a padding token).
//
// On the GPU (the contract both backends share: kernels/twins/embedding.inc):
// indices are contiguous i64, every value in [0, V) (the op layer has checked). The forward moves
// bytes, so any dtype works. The backward takes grad_y in f32, f64, bf16 or f16 and writes
// grad_weight in the same dtype, summing in f32 (f64 for f64) — deterministically: each row adds
// its contributions in increasing position order, exactly the CPU's order.
#if BRIGADE_CUDA_EMULATOR
#include "emulator/runtime.h"
#else
#include <cub/device/device_radix_sort.cuh>
#endif

#include <algorithm>
#include <bit>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/row_vectors.cuh"

namespace brigade::cuda {
namespace {

// ---- forward ----

template <class Unit>
__global__ void gather_rows_kernel(Unit* out, const Unit* weight, const int64_t* indices, int64_t n,
                                   int64_t units_per_row) {
  // blockDim = (32, kRowsPerBlock): a warp per position, grid-striding over positions.
  for (int64_t i = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.y; i < n; i += int64_t(gridDim.x) * kRowsPerBlock) {
    const Unit* src = weight + indices[i] * units_per_row;
    Unit* dst = out + i * units_per_row;
    for (int64_t k = threadIdx.x; k < units_per_row; k += kWarp) dst[k] = src[k];
  }
}

template <class Unit>
void gather_rows(const Tensor& out, const Tensor& weight, const Tensor& indices, int64_t row_bytes) {
  const int64_t n = indices.numel();
  const int64_t blocks = std::min<int64_t>(ceil_div(n, kRowsPerBlock), int64_t(sm_count(out.device())) * 16);
  gather_rows_kernel<Unit><<<unsigned(blocks), dim3(kWarp, kRowsPerBlock), 0, stream_for(out)>>>(
      static_cast<Unit*>(out.raw_data()), static_cast<const Unit*>(weight.raw_data()), indices.data<int64_t>(), n,
      row_bytes / int64_t(sizeof(Unit)));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

// ---- backward ----

__global__ void iota_kernel(int64_t* out, int64_t n) {
  BRIGADE_GRID_STRIDE_LOOP(i, n, int64_t) out[i] = i;
}

// starts[v] = the first s with sorted[s] >= v, for v in [0, rows]: row v's positions are
// sorted_positions[starts[v] .. starts[v + 1]).
__global__ void run_starts_kernel(int64_t* starts, const int64_t* sorted, int64_t n, int64_t rows) {
  BRIGADE_GRID_STRIDE_LOOP(v, rows + 1, int64_t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (sorted[mid] < v) lo = mid + 1;
      else hi = mid;
    }
    starts[v] = lo;
  }
}

// A warp per grad_weight row (kRowsPerBlock rows a block, grid-striding over rows); each lane takes
// W-element chunks of the row's columns and adds the row's run of gradient rows in position order.
// W is the vector width when every row of grad_y and grad_weight starts on a 16-byte boundary, else 1.
template <int W, class T>
__global__ void sum_runs_kernel(T* grad_weight, const T* grad_y, const int64_t* starts, const int64_t* positions,
                                int64_t rows, int64_t d) {
  using C = compute_t<T>;
  const int64_t chunks = d / W;
  for (int64_t v = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.y; v < rows;
       v += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t begin = starts[v], end = starts[v + 1];
    for (int64_t k = threadIdx.x; k < chunks; k += kWarp) {
      C acc[W];
#pragma unroll
      for (int j = 0; j < W; ++j) acc[j] = C(0);
      // Unrolled so that several rows' loads are in flight at once (a frequent token's run is
      // hundreds long); the adds still happen in position order.
#pragma unroll 4
      for (int64_t s = begin; s < end; ++s) {
        C g[W];
        load_chunk<W>(grad_y, positions[s] * d + k * W, g);
#pragma unroll
        for (int j = 0; j < W; ++j) acc[j] += g[j];
      }
      store_chunk<W>(grad_weight, v * d + k * W, acc);
    }
  }
}

}  // namespace

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t row_bytes = weight.size(1) * int64_t(weight.element_size());
  if (indices.numel() == 0 || row_bytes == 0) return;
  // The widest unit that divides the row and keeps both base addresses aligned.
  const auto fits = [&](size_t unit) {
    return row_bytes % int64_t(unit) == 0 && is_aligned(out.raw_data(), unit) && is_aligned(weight.raw_data(), unit);
  };
  if (fits(16)) return gather_rows<uint4>(out, weight, indices, row_bytes);
  if (fits(8)) return gather_rows<uint2>(out, weight, indices, row_bytes);
  if (fits(4)) return gather_rows<uint32_t>(out, weight, indices, row_bytes);
  gather_rows<uint16_t>(out, weight, indices, row_bytes);  // every dtype is at least 2 bytes
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& indices) {
  const int64_t rows = grad_weight.size(0), d = grad_weight.size(1), n = indices.numel();
  if (rows == 0 || d == 0) return;
  const Device device = grad_weight.device();
  cudaStream_t stream = stream_for(grad_weight);
  if (n == 0) {  // nothing looked up: all zeros (the all-zero bit pattern in every float dtype)
    BRIGADE_CUDA_CHECK(cudaMemsetAsync(grad_weight.raw_data(), 0, grad_weight.nbytes(), stream));
    return;
  }

  // 1. Sort (index, position) pairs by index, only on the bits an index in [0, rows) can have.
  const Tensor positions = empty({n}, DType::i64, device);
  const Tensor sorted_indices = empty({n}, DType::i64, device);
  const Tensor sorted_positions = empty({n}, DType::i64, device);
  iota_kernel<<<grid_for(n, device), kThreads, 0, stream>>>(positions.data<int64_t>(), n);
  BRIGADE_CUDA_CHECK_LAUNCH();
#if BRIGADE_CUDA_EMULATOR
  // CUB's sort is library device code the CPU emulator cannot compile; it sorts on the host instead
  // (device memory is host memory there), stably, as the radix sort does — as work queued on the
  // stream like the sort it stands for, so it runs after iota_kernel and before what follows.
  {
    const int64_t* keys = indices.data<int64_t>();
    const int64_t* from = positions.data<int64_t>();
    int64_t* to_indices = sorted_indices.data<int64_t>();
    int64_t* to_positions = sorted_positions.data<int64_t>();
    emu::enqueue(stream, "cub::DeviceRadixSort::SortPairs (emulated)",
                 {{keys, false}, {from, false}, {to_indices, true}, {to_positions, true}},
                 [keys, from, to_indices, to_positions, n] {
                   std::vector<int64_t> order(size_t(n), 0);
                   std::iota(order.begin(), order.end(), int64_t(0));
                   std::stable_sort(order.begin(), order.end(),
                                    [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
                   for (int64_t i = 0; i < n; ++i) {
                     to_indices[i] = keys[order[size_t(i)]];
                     to_positions[i] = from[order[size_t(i)]];
                   }
                   return std::string();
                 });
  }
#else
  const int end_bit = std::max(1, int(std::bit_width(uint64_t(rows - 1))));
  size_t temp_bytes = 0;
  BRIGADE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, indices.data<int64_t>(),
                                                     sorted_indices.data<int64_t>(), positions.data<int64_t>(),
                                                     sorted_positions.data<int64_t>(), n, 0, end_bit, stream));
  const Tensor temp = scratch(device, std::max<size_t>(temp_bytes, 1));
  BRIGADE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, indices.data<int64_t>(),
                                                     sorted_indices.data<int64_t>(), positions.data<int64_t>(),
                                                     sorted_positions.data<int64_t>(), n, 0, end_bit, stream));
#endif

  // 2. Where each row's run starts.
  const Tensor starts = empty({rows + 1}, DType::i64, device);
  run_starts_kernel<<<grid_for(rows + 1, device), kThreads, 0, stream>>>(starts.data<int64_t>(),
                                                                         sorted_indices.data<int64_t>(), n, rows);
  BRIGADE_CUDA_CHECK_LAUNCH();

  // 3. Each row adds its run, in position order.
  visit_floating(grad_weight.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVecWidth<T>;
    T* out = static_cast<T*>(grad_weight.raw_data());
    const T* in = static_cast<const T*>(grad_y.raw_data());
    const unsigned blocks =
        unsigned(std::min<int64_t>(ceil_div(rows, kRowsPerBlock), int64_t(sm_count(device)) * 32));
    const dim3 block(kWarp, kRowsPerBlock);
    if (d % V == 0 && is_aligned(out, 16) && is_aligned(in, 16))
      sum_runs_kernel<V, T><<<blocks, block, 0, stream>>>(out, in, starts.data<int64_t>(),
                                                          sorted_positions.data<int64_t>(), rows, d);
    else
      sum_runs_kernel<1, T><<<blocks, block, 0, stream>>>(out, in, starts.data<int64_t>(),
                                                          sorted_positions.data<int64_t>(), rows, d);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
