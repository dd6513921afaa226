// The hand-written GEMM on CUDA cores: C = A @ B in f32, for f32, bf16 and f16 inputs.
//
// Why it is built this way (each step removes the bottleneck the previous one leaves):
//   1. Block tiles. A block of 256 threads owns a 128 x 128 tile of C and walks K in steps of 8. At
//      each step it copies a 128 x 8 slice of A and an 8 x 128 slice of B into shared memory once;
//      every value there is then read by 16 threads instead of being fetched 16 times from DRAM.
//   2. Register tiles. Each thread computes an 8 x 8 piece of the tile. Per k it reads 8 values of A
//      and 8 of B from shared memory (as four float4 reads) and does 64 fused multiply-adds: the
//      arithmetic now outweighs the shared-memory traffic 4 to 1.
//   3. Vector loads. Global reads are 16 bytes (4 floats, or 4 bf16 in 8 bytes) per thread, along
//      whichever dim of the operand is contiguous, so a warp reads whole cache lines.
//   4. Double buffering. While the threads multiply one slice in shared memory, the next slice is
//      already on its way from global memory into registers; it goes to the other buffer after the
//      math, so each K step costs one __syncthreads instead of two and the load latency is hidden.
//
// Both operands are stored in shared memory k-major ("transposed": tile[k][row]) so that the eight
// values a thread needs for one k are two float4 reads. B is handled as Bᵀ (rows = n), which makes
// its loader the same as A's. Edges are bounds-checked per load and store, so any m, n, k works;
// out-of-range values load as 0 and contribute nothing.
//
// The thread -> element maps: with ty = thread / 16 and tx = thread % 16, a thread owns rows
// {4ty..4ty+3, 64+4ty..64+4ty+3} and the same pattern of columns with tx. Splitting each thread's 8
// rows into two groups of 4, 64 apart, is what keeps its shared-memory reads both vectorised and
// free of bank conflicts.
#include <climits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm.h"

namespace brigade::cuda {
namespace {

constexpr int kTile = 128;  // rows of A / columns of B per block
constexpr int kStepK = 8;   // K per shared-memory slice
constexpr int kBlockThreads = 256;
// Padding per shared row (in floats). The k-contiguous loader writes column-wise, two threads per
// row; 4 extra floats put those two writes 16 banks apart. 4 keeps rows 16-byte aligned for float4.
constexpr int kPad = 4;

// One operand seen as a [rows, k] matrix (A itself, or Bᵀ), at its batch entry.
template <class T>
struct Operand {
  const T* data;
  int64_t row_stride, col_stride, batch_stride;
  bool k_contiguous;  // which loader map: along k (col_stride == 1) or along rows (row_stride == 1)
  bool vector_loads;  // the contiguous dim has stride 1 and every group of 4 starts 4-element aligned
};

template <class T>
struct Output {
  T* data;
  int64_t row_stride, batch_stride;
  bool vector_stores;  // rows and the base are aligned for 4-element stores
};

// ---- 4-element loads and stores, widened to / narrowed from f32 ----
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
// Four 16-bit values in one 8-byte load; element 0 is the low half of the first word.
__device__ __forceinline__ float4 load4(const bf16* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  return {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),
          __uint_as_float(raw.y & 0xffff0000u)};
}
__device__ __forceinline__ float4 load4(const f16* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  auto widen = [](uint32_t bits) { return __half2float(__ushort_as_half(uint16_t(bits))); };
  return {widen(raw.x), widen(raw.x >> 16), widen(raw.y), widen(raw.y >> 16)};
}

__device__ __forceinline__ void store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <class T>  // bf16 or f16: four roundings packed into one 8-byte store
__device__ __forceinline__ void store4(T* p, const float (&v)[4]) {
  auto bits = [&](int i) { return uint32_t(from_compute<T>(v[i]).bits); };
  *reinterpret_cast<uint2*>(p) = make_uint2(bits(0) | bits(1) << 16, bits(2) | bits(3) << 16);
}

// Where thread t's four elements sit in a 128 x 8 slice: along k (two threads per row) when the
// operand is k-contiguous, else along rows (32 threads per k).
struct SlicePosition {
  int row, k;
};
__device__ __forceinline__ SlicePosition slice_position(bool k_contiguous, int t) {
  return k_contiguous ? SlicePosition{t / 2, (t % 2) * 4} : SlicePosition{(t % 32) * 4, t / 32};
}

// Reads thread t's four elements of the slice (rows row0.., k k0..) into registers, zero outside.
template <class T>
__device__ __forceinline__ float4 fetch_slice(const Operand<T>& x, const T* base, int rows, int k, int row0, int k0,
                                              int t) {
  const SlicePosition pos = slice_position(x.k_contiguous, t);
  const int r = row0 + pos.row, p = k0 + pos.k;
  const bool whole = x.k_contiguous ? (r < rows && p + 3 < k) : (p < k && r + 3 < rows);
  if (x.vector_loads && whole) return load4(base + r * x.row_stride + p * x.col_stride);
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int ri = x.k_contiguous ? r : r + i, pi = x.k_contiguous ? p + i : p;
    v[i] = (ri < rows && pi < k) ? to_compute(base[ri * x.row_stride + pi * x.col_stride]) : 0.f;
  }
  return {v[0], v[1], v[2], v[3]};
}

// Writes thread t's four fetched elements into the k-major shared slice tile[k][row].
__device__ __forceinline__ void stash_slice(float (*tile)[kTile + kPad], bool k_contiguous, float4 v, int t) {
  const SlicePosition pos = slice_position(k_contiguous, t);
  if (k_contiguous) {
    tile[pos.k + 0][pos.row] = v.x;
    tile[pos.k + 1][pos.row] = v.y;
    tile[pos.k + 2][pos.row] = v.z;
    tile[pos.k + 3][pos.row] = v.w;
  } else {
    *reinterpret_cast<float4*>(&tile[pos.k][pos.row]) = v;
  }
}

// Consecutive blocks take the tiles of a band of 8 tile-rows column by column, so the A rows and B
// columns a wave of blocks reads at once stay in L2.
__device__ __forceinline__ void tile_coords(int tiles_m, int tiles_n, int& tm, int& tn) {
  constexpr int kBand = 8;
  const int t = blockIdx.x;
  const int band = t / (kBand * tiles_n);
  const int first = band * kBand;
  const int height = min(tiles_m - first, kBand);
  const int within = t - band * kBand * tiles_n;
  tm = first + within % height;
  tn = within / height;
}

template <class In, class Out>
__global__ void __launch_bounds__(kBlockThreads, 2)  // 2 blocks per SM: at most 128 registers
    gemm_tiled_kernel(int m, int n, int k, Operand<In> a, Operand<In> bt, Output<Out> c, int tiles_m, int tiles_n) {
  __shared__ __align__(16) float a_tile[2][kStepK][kTile + kPad];
  __shared__ __align__(16) float b_tile[2][kStepK][kTile + kPad];

  int tm, tn;
  tile_coords(tiles_m, tiles_n, tm, tn);
  const int m0 = tm * kTile, n0 = tn * kTile;
  const int t = threadIdx.x, ty = t / 16, tx = t % 16;
  const int64_t batch = blockIdx.z;
  const In* a_base = a.data + batch * a.batch_stride;
  const In* b_base = bt.data + batch * bt.batch_stride;

  float acc[8][8] = {};
  const int steps = (k + kStepK - 1) / kStepK;
  if (steps > 0) {
    stash_slice(a_tile[0], a.k_contiguous, fetch_slice(a, a_base, m, k, m0, 0, t), t);
    stash_slice(b_tile[0], bt.k_contiguous, fetch_slice(bt, b_base, n, k, n0, 0, t), t);
    __syncthreads();
  }
  for (int s = 0; s < steps; ++s) {
    const int cur = s % 2;
    const bool more = s + 1 < steps;
    float4 next_a = {}, next_b = {};
    if (more) {  // issue the next slice's global loads now; they land while we compute
      next_a = fetch_slice(a, a_base, m, k, m0, (s + 1) * kStepK, t);
      next_b = fetch_slice(bt, b_base, n, k, n0, (s + 1) * kStepK, t);
    }
#pragma unroll
    for (int p = 0; p < kStepK; ++p) {
      const float4 a_lo = *reinterpret_cast<const float4*>(&a_tile[cur][p][ty * 4]);
      const float4 a_hi = *reinterpret_cast<const float4*>(&a_tile[cur][p][64 + ty * 4]);
      const float4 b_lo = *reinterpret_cast<const float4*>(&b_tile[cur][p][tx * 4]);
      const float4 b_hi = *reinterpret_cast<const float4*>(&b_tile[cur][p][64 + tx * 4]);
      const float av[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float bv[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    if (more) {  // the other buffer was last read in step s - 1, which every thread has finished
      stash_slice(a_tile[1 - cur], a.k_contiguous, next_a, t);
      stash_slice(b_tile[1 - cur], bt.k_contiguous, next_b, t);
    }
    __syncthreads();
  }

  Out* c_base = c.data + batch * c.batch_stride;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
    if (row >= m) continue;
#pragma unroll
    for (int g = 0; g < 2; ++g) {  // the thread's two groups of 4 columns, 64 apart
      const int col = n0 + g * 64 + tx * 4;
      const float v[4] = {acc[i][g * 4], acc[i][g * 4 + 1], acc[i][g * 4 + 2], acc[i][g * 4 + 3]};
      Out* dst = c_base + int64_t(row) * c.row_stride + col;
      if (c.vector_stores && col + 3 < n) {
        store4(dst, v);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (col + j < n) dst[j] = from_compute<Out>(v[j]);
      }
    }
  }
}

// Describes a [rows, k] operand with strides (rs along rows, cs along k) for the kernel.
template <class In>
Operand<In> describe(const void* data, int64_t rows, int64_t k, int64_t rs, int64_t cs, int64_t batch_stride) {
  Operand<In> x{static_cast<const In*>(data), rs, cs, batch_stride, true, false};
  // Load along rows only when rows are the unit-stride dim and k is not; otherwise along k (with
  // scalar loads if neither stride is 1, e.g. a view sliced with a step).
  x.k_contiguous = !(rs == 1 && cs != 1);
  const int64_t unit = x.k_contiguous ? cs : rs, outer = x.k_contiguous ? rs : cs;
  const int64_t outer_size = x.k_contiguous ? rows : k;
  x.vector_loads = unit == 1 && (outer_size == 1 || outer % 4 == 0) && batch_stride % 4 == 0 &&
                   is_aligned(data, 4 * sizeof(In));
  return x;
}

template <class In, class Out>
void launch(const GemmProblem& p, cudaStream_t stream) {
  const Operand<In> a = describe<In>(p.a.data, p.m, p.k, p.a.row_stride, p.a.col_stride, p.a.batch_stride);
  // Bᵀ: rows are B's columns, so the two strides swap.
  const Operand<In> bt = describe<In>(p.b.data, p.n, p.k, p.b.col_stride, p.b.row_stride, p.b.batch_stride);
  Output<Out> c{static_cast<Out*>(p.c.data), p.c.row_stride, p.c.batch_stride, false};
  c.vector_stores = (p.m == 1 || p.c.row_stride % 4 == 0) && p.c.batch_stride % 4 == 0 &&
                    is_aligned(p.c.data, 4 * sizeof(Out));
  const int64_t tiles_m = (p.m + kTile - 1) / kTile, tiles_n = (p.n + kTile - 1) / kTile;
  BRIGADE_CHECK(p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX && tiles_m * tiles_n <= INT_MAX && p.batch <= 65535, "matmul (tiled): problem [", p.m, ", ", p.k, "] @ [",
                p.k, ", ", p.n, "] (batch ", p.batch, ") is too large for one launch");
  const dim3 grid(unsigned(tiles_m * tiles_n), 1, unsigned(p.batch));
  gemm_tiled_kernel<In, Out><<<grid, kBlockThreads, 0, stream>>>(int(p.m), int(p.n), int(p.k), a, bt, c, int(tiles_m),
                                                             int(tiles_n));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gemm_tiled(const GemmProblem& p, cudaStream_t stream) {
  const bool wide_out = p.out == DType::f32;
  switch (p.in) {
    case DType::f32:
      if (wide_out) return launch<float, float>(p, stream);
      break;
    case DType::bf16:
      return wide_out ? launch<bf16, float>(p, stream) : launch<bf16, bf16>(p, stream);
    case DType::f16:
      return wide_out ? launch<f16, float>(p, stream) : launch<f16, f16>(p, stream);
    default:
      break;
  }
  fail("matmul (tiled): no kernel for ", dtype_name(p.in), " inputs with a ", dtype_name(p.out), " output");
}

}  // namespace brigade::cuda
