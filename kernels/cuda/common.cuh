// Building blocks shared by brigade's hand-written CUDA kernels (CUDA translation units only).
//
//   - element types: loading f32/f64/bf16/f16 into the compute type (f32, or f64 for f64) and
//     rounding back exactly as core/half.h does on the CPU, so both backends store the same bits;
//   - 16-byte vectors: a thread moves 4 floats or 8 bf16 per instruction on the fast paths;
//   - warp and block reductions in a fixed order (results never depend on timing);
//   - StridedLayout: any strided/broadcast operand, seen through a row-major linear index;
//   - launch helpers: grid sizes, the SM count, the one stream every kernel goes to.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "core/half.h"
#include "core/tensor.h"
#include "kernels/cpu/strided.h"

namespace brigade::cuda {

// The block's dynamic shared memory (the launch's third <<<>>> argument): CUDA promises it 16-byte
// alignment only, so a kernel that needs more rounds the pointer up itself.
__device__ __forceinline__ unsigned char* dynamic_shared_memory() {
#if BRIGADE_CUDA_EMULATOR
  return static_cast<unsigned char*>(::brigade::emu::dynamic_shared_memory());
#else
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  return dynamic_smem;
#endif
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- element types ------------------------------------------------------------------------------

// Every kernel computes in f32, except for f64 data, which stays f64.
template <class T> struct ComputeType { using type = float; };
template <> struct ComputeType<double> { using type = double; };
template <class T> using compute_t = typename ComputeType<T>::type;

__device__ __forceinline__ float to_compute(float v) { return v; }
__device__ __forceinline__ double to_compute(double v) { return v; }
// bf16 is the top half of an f32: widening is a shift.
__device__ __forceinline__ float to_compute(bf16 v) { return __uint_as_float(uint32_t(v.bits) << 16); }
__device__ __forceinline__ float to_compute(f16 v) { return __half2float(__ushort_as_half(v.bits)); }

__device__ __forceinline__ bf16 bf16_from_bits(uint16_t bits) {
  bf16 v;
  v.bits = bits;
  return v;
}
__device__ __forceinline__ f16 f16_from_bits(uint16_t bits) {
  f16 v;
  v.bits = bits;
  return v;
}

// Rounds a compute value into storage type T: nearest, ties to even — bit for bit what
// core/half.h's bf16(float) and f16(float) produce on the host, NaNs included (the hardware's
// conversions agree on every number but spell NaN differently).
template <class T> __device__ __forceinline__ T from_compute(compute_t<T> v);
template <> __device__ __forceinline__ float from_compute<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_compute<double>(double v) { return v; }
template <> __device__ __forceinline__ bf16 from_compute<bf16>(float v) {
  const uint32_t u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_from_bits(uint16_t((u >> 16) | 0x40));  // quiet NaN
  return bf16_from_bits(uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));  // add half an ulp, ties to even
}
template <> __device__ __forceinline__ f16 from_compute<f16>(float v) {
  if (v != v) return f16_from_bits(uint16_t(((__float_as_uint(v) >> 16) & 0x8000u) | 0x7e00u));
  return f16_from_bits(__half_as_ushort(__float2half_rn(v)));  // round to nearest even, subnormals exact
}

// Runs fn(T{}) with T the storage type of a floating dtype — the CUDA twin of visit_float, which
// also takes bf16 and f16 (CUDA kernels read them directly).
template <class Fn>
decltype(auto) visit_floating(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::bf16: return fn(bf16{});
    case DType::f16: return fn(f16{});
    default: fail(op, ": expected a floating-point tensor, got ", dtype_name(t));
  }
}

// ---- math in the compute type --------------------------------------------------------------------
// Overloads so one functor body serves f32 and f64. Full-precision library calls (not the __expf
// intrinsics): these kernels are memory-bound, and staying within an ulp or two of the CPU's libm
// keeps the cross-backend tests tight.
__device__ __forceinline__ float dev_exp(float x) { return expf(x); }
__device__ __forceinline__ double dev_exp(double x) { return exp(x); }
__device__ __forceinline__ float dev_log(float x) { return logf(x); }
__device__ __forceinline__ double dev_log(double x) { return log(x); }
__device__ __forceinline__ float dev_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double dev_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float dev_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double dev_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float dev_pow(float x, float e) { return powf(x, e); }
__device__ __forceinline__ double dev_pow(double x, double e) { return pow(x, e); }

// ---- 16-byte vectors ------------------------------------------------------------------------------
// One 128-bit load or store moves kVecWidth<T> elements: 4 f32, 8 bf16/f16, 2 f64. Wide accesses
// cut the number of memory instructions 4-8x, which is what bounds an elementwise kernel's speed.
template <class T> constexpr int kVecWidth = int(16 / sizeof(T));

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <int N, class T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}
template <int N, class T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

inline bool is_aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// ---- reductions within a warp and a block ---------------------------------------------------------
// Butterfly (xor) shuffles: after log2(32) steps every lane holds the same total, combined in an
// order fixed by lane numbers alone — so the result is the same on every run.
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kThreads = 256;  // the default block: 8 warps

template <class T>
__device__ __forceinline__ T shfl_xor(T v, int mask) {
  return __shfl_xor_sync(kFullMask, v, mask);
}

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int mask = kWarp / 2; mask > 0; mask >>= 1) v = op(v, shfl_xor(v, mask));
  return v;
}

struct Sum {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct Min {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// Reduces v over the whole block and returns the result to every thread. blockDim.x must be a
// multiple of 32 (at most 1024); threads with nothing to add pass `identity`. Callable several times
// in a row: the trailing barrier keeps one call's shared slots from being overwritten by the next.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T partial[kWarp + 1];
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  const int warps = int(blockDim.x) / kWarp;
  v = warp_reduce(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? partial[lane] : identity;
    w = warp_reduce(w, op);
    if (lane == 0) partial[kWarp] = w;
  }
  __syncthreads();
  const T result = partial[kWarp];
  __syncthreads();
  return result;
}

// One row per warp, or one row per block for long rows: the two ways a row-wise kernel (softmax,
// norms, cross entropy) spreads a row over threads. Warps suit rows up to about a thousand elements
// (each lane handles a few dozen); longer rows want more threads. Kernels are written once against
// this interface and instantiated for both:
//   warp:  blockDim = (32, kRowsPerBlock), grid = ceil(rows / kRowsPerBlock)
//   block: blockDim = (kThreads),          grid = rows
constexpr int kRowsPerBlock = 8;
constexpr int64_t kWarpRowLimit = 1024;  // longer rows get a whole block

template <bool kWholeBlock>
struct RowGroup {
  __device__ __forceinline__ static int64_t row() {
    return kWholeBlock ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  }
  __device__ __forceinline__ static int rank() { return int(threadIdx.x); }
  __device__ __forceinline__ static int size() { return kWholeBlock ? int(blockDim.x) : kWarp; }
  // Every thread of the group gets the result. In the warp form, rows past the end must have left
  // the kernel as whole warps; the block form syncs the block, so every thread must call it.
  template <class T, class Op>
  __device__ __forceinline__ static T reduce(T v, Op op, T identity) {
    if constexpr (kWholeBlock) return block_reduce(v, op, identity);
    else return warp_reduce(v, op);
  }
};

// Picks the group for rows of `length` elements and calls launch(whole_block, grid, block), where
// whole_block is std::true_type or std::false_type — the kernel's kWholeBlock argument.
template <class Launch>
void launch_rows(int64_t rows, int64_t length, Launch&& launch) {
  if (length > kWarpRowLimit) launch(std::true_type{}, dim3(unsigned(rows)), dim3(kThreads));
  else launch(std::false_type{}, dim3(unsigned(ceil_div(rows, kRowsPerBlock))), dim3(kWarp, kRowsPerBlock));
}

// ---- strided operands -----------------------------------------------------------------------------
// The geometry of N operands walked together over one shape: the coalesced loop nest of
// cpu::coalesce (size-1 dims dropped, back-to-back dims merged, broadcast dims at stride 0), packed
// into a struct small enough to pass to a kernel by value. A contiguous tensor collapses to one dim,
// x [4096, 768] + bias [768] to two.
constexpr int kMaxDims = 8;

template <int N>
struct StridedLayout {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // Element offsets of row-major element `i` in each operand. Index is uint32_t when the element
  // count allows: 32-bit division is several times cheaper than 64-bit on a GPU.
  template <class Index>
  __device__ __forceinline__ void offsets(Index i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const Index size = Index(sizes[d]);
      const Index q = i / size;
      const int64_t idx = int64_t(i - q * size);
      for (int k = 0; k < N; ++k) off[k] += idx * strides[k][d];
      i = q;
    }
    for (int k = 0; k < N; ++k) off[k] += int64_t(i) * strides[k][0];  // the outermost dim needs no division
  }
};

// Builds the layout of `operands` seen through `shape` (each must broadcast to it). Throws, naming
// `op`, for the rare view whose dims cannot be merged down to kMaxDims.
template <int N>
StridedLayout<N> make_layout(const char* op, const Shape& shape, const std::array<const Tensor*, N>& operands) {
  const cpu::LoopNest nest = cpu::coalesce(shape, std::vector<const Tensor*>(operands.begin(), operands.end()));
  BRIGADE_CHECK(nest.shape.size() <= size_t(kMaxDims), op, ": the CUDA kernels take at most ", kMaxDims,
                " dims after merging contiguous ones; shape ", shape_str(shape), " needs ", nest.shape.size(),
                " (make the operands contiguous first)");
  StridedLayout<N> layout;
  layout.ndim = int(nest.shape.size());
  for (int d = 0; d < layout.ndim; ++d) {
    layout.sizes[d] = nest.shape[size_t(d)];
    for (int k = 0; k < N; ++k) layout.strides[k][d] = nest.strides[size_t(k)][size_t(d)];
  }
  return layout;
}

// ---- launching ------------------------------------------------------------------------------------
// Streaming multiprocessors of `device` (132 on an H200), asked once per device.
int sm_count(Device device);

// Blocks for a grid-stride loop over `work` items: enough to fill every SM several times over, and
// no more — each thread then loops, which amortises its index set-up.
inline unsigned grid_for(int64_t work, Device device, int threads = kThreads) {
  const int64_t cap = int64_t(sm_count(device)) * 16;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(ceil_div(work, threads), cap)));
}

// Scratch memory on `device` for one op (partial sums and the like), from the caching allocator.
// Returned as a tensor so it lives as long as the caller holds it; work queued on the same stream
// before it is freed is ordered before any later reuse.
inline Tensor scratch(Device device, size_t bytes) {
  return empty({int64_t((bytes + 7) / 8)}, DType::i64, device);
}

// A grid-stride loop: thread t handles t, t + T, t + 2T, ... where T is the number of threads in
// the grid. Keeps kernels correct for any grid size, so launches can be sized for the GPU.
#define BRIGADE_GRID_STRIDE_LOOP(i, n, Index)                                                         \
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); i < Index(n);        \
       i += Index(blockDim.x) * Index(gridDim.x))

}  // namespace brigade::cuda
