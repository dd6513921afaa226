// CUDA copy and fill: one kernel for every pair of dtypes and any strides.
//
// The host merges dims the way the CPU loop does (cpu::coalesce): a contiguous tensor becomes one
// flat dim, a transposed matrix stays two. Each thread then turns its flat index into an offset per
// operand — a division per remaining dim — and converts one element. Indices are 32-bit whenever the
// tensors are small enough (most are): 64-bit division costs several times more on a GPU.
//
// Two cases skip that loop: a contiguous copy of one dtype is cudaMemcpyAsync, and a contiguous
// conversion (a bf16 step's f32 -> bf16 weights and bf16 -> f32 gradients, 300 of them a GPT-2 step)
// moves eight elements per thread per step as whole vectors, where the one-element loop reached
// about 55% of the copy bandwidth on an H200 (bench/results/h200-gpt2-2026-11-26.md).
//
// A third: the contiguous copy of a transposed view (x.transpose(-1, -2).contiguous(), batched or not)
// goes through 32x32 shared-memory tiles, so both its reads and its writes are coalesced; one element
// per thread reached 14% (bf16) and 26% (f32) of the copy bandwidth, the writes or the reads each
// fetching a 32-byte sector per element. Expected: 80-90% for f32; less for bf16 (a warp moves 64
// bytes per access, half a cache line, and the tile's two barriers are not amortised over much data)
// — unmeasured yet, `brigade bench kernels` has both rows. Other strided copies keep the
// one-element loop.
#include "kernels/cuda/kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "core/cuda/element.cuh"
#include "kernels/cpu/strided.h"

namespace brigade::cuda {
namespace {

constexpr int kMaxDims = 12;
constexpr int kThreads = 256;

// A coalesced loop nest for at most two operands (dst, src), passed to the kernel by value.
template <class Index>
struct Nest {
  int ndim = 0;
  Index size[kMaxDims] = {};
  Index dst_stride[kMaxDims] = {};
  Index src_stride[kMaxDims] = {};
};

template <class Index>
__device__ inline void offsets(const Nest<Index>& nest, Index i, Index& dst_offset, Index& src_offset) {
  if (nest.ndim == 1) {  // the common case: no division at all
    dst_offset = i * nest.dst_stride[0];
    src_offset = i * nest.src_stride[0];
    return;
  }
  dst_offset = 0;
  src_offset = 0;
  for (int d = nest.ndim - 1; d >= 0; --d) {  // innermost dim first: row-major order
    const Index index = i % nest.size[d];
    i /= nest.size[d];
    dst_offset += index * nest.dst_stride[d];
    src_offset += index * nest.src_stride[d];
  }
}

template <class D, class S, class Index>
__global__ void copy_kernel(D* dst, const S* src, Index n, Nest<Index> nest) {
  const Index step = Index(gridDim.x) * Index(blockDim.x);
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); i < n; i += step) {
    Index d = 0, s = 0;
    offsets(nest, i, d, s);
    dst[d] = element::convert<D>(src[s]);
  }
}

constexpr int kConvertWidth = 8;  // elements per vector: 16 bytes of bf16, 32 of f32

template <class T>
struct alignas(sizeof(T) * kConvertWidth) Vector {
  T v[kConvertWidth];
};

template <class D, class S>
__global__ void convert_contiguous_kernel(D* dst, const S* src, int64_t vectors) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += step) {
    const Vector<S> in = reinterpret_cast<const Vector<S>*>(src)[i];
    Vector<D> out;
#pragma unroll
    for (int j = 0; j < kConvertWidth; ++j) out.v[j] = element::convert<D>(in.v[j]);
    reinterpret_cast<Vector<D>*>(dst)[i] = out;
  }
}

// ---- the transposing copy ----
// dst[b, o, i] = src[b, o, i] where dst is contiguous along i and src along o (the contiguous copy of a
// transposed view, batched or not). One element per thread would make either the reads or the writes
// stride through memory, a 32-byte sector fetched per element; instead a 32x32 tile goes through
// shared memory: the warp reads 32 consecutive o (coalesced in src), the block syncs, the warp writes
// 32 consecutive i (coalesced in dst). The tile has a 33rd column so that reading it down a column
// hits 32 different banks (4-byte elements: 33 words apart; 2-byte: 16.5 words, still distinct).
constexpr int kTile = 32;
constexpr int kTileRows = 8;  // blockDim = (32, 8): each thread moves 4 elements of a tile

struct TransposeGeometry {
  int64_t batch = 1, outer = 0, inner = 0;
  int64_t dst_batch = 0, dst_outer = 0;  // dst's stride along i is 1
  int64_t src_batch = 0, src_inner = 0;  // src's stride along o is 1
};

template <class D, class S>
__global__ void transpose_tiles_kernel(D* dst, const S* src, TransposeGeometry g) {
  __shared__ S tile[kTile][kTile + 1];  // tile[i - i0][o - o0]
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  for (int64_t b = blockIdx.z; b < g.batch; b += gridDim.z) {
    const S* from = src + b * g.src_batch;
    D* to = dst + b * g.dst_batch;
    for (int64_t o0 = int64_t(blockIdx.y) * kTile; o0 < g.outer; o0 += int64_t(gridDim.y) * kTile) {
      for (int64_t i0 = int64_t(blockIdx.x) * kTile; i0 < g.inner; i0 += int64_t(gridDim.x) * kTile) {
        for (int k = ty; k < kTile; k += kTileRows) {
          const int64_t o = o0 + tx, i = i0 + k;
          if (o < g.outer && i < g.inner) tile[k][tx] = from[o + i * g.src_inner];
        }
        __syncthreads();
        for (int k = ty; k < kTile; k += kTileRows) {
          const int64_t o = o0 + k, i = i0 + tx;
          if (o < g.outer && i < g.inner) to[o * g.dst_outer + i] = element::convert<D>(tile[tx][k]);
        }
        __syncthreads();  // the next tile overwrites this one
      }
    }
  }
}

// The geometry when the merged loop nest is a (batched) transpose: two or three dims, dst contiguous
// along the last, src along the one before it (and not along the last). Anything else: none.
std::optional<TransposeGeometry> transpose_geometry(const cpu::LoopNest& loops) {
  const size_t n = loops.shape.size();
  if (n != 2 && n != 3) return std::nullopt;
  const Strides& dst = loops.strides[0];
  const Strides& src = loops.strides[1];
  if (dst[n - 1] != 1 || src[n - 2] != 1 || src[n - 1] == 1) return std::nullopt;
  TransposeGeometry g;
  g.outer = loops.shape[n - 2];
  g.inner = loops.shape[n - 1];
  g.dst_outer = dst[n - 2];
  g.src_inner = src[n - 1];
  if (n == 3) {
    g.batch = loops.shape[0];
    g.dst_batch = dst[0];
    g.src_batch = src[0];
  }
  return g;
}

template <class D, class S>
void transpose_tiles(D* dst, const S* src, const TransposeGeometry& g, cudaStream_t stream) {
  const dim3 grid(unsigned(std::min<int64_t>((g.inner + kTile - 1) / kTile, int64_t(1) << 30)),
                  unsigned(std::min<int64_t>((g.outer + kTile - 1) / kTile, 65535)),
                  unsigned(std::min<int64_t>(g.batch, 65535)));
  transpose_tiles_kernel<D, S><<<grid, dim3(kTile, kTileRows), 0, stream>>>(dst, src, g);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

template <class T, class Index>
__global__ void fill_kernel(T* dst, Index n, Nest<Index> nest, T value) {
  const Index step = Index(gridDim.x) * Index(blockDim.x);
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); i < n; i += step) {
    Index d = 0, unused = 0;
    offsets(nest, i, d, unused);
    dst[d] = value;
  }
}

unsigned grid_for(int64_t n) { return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 16)); }

// Whether 32-bit indices suffice: every flat index, plus one grid's worth of threads (the loop's
// last step), and every element offset reachable through the strides must fit in int32.
bool fits_int32(const cpu::LoopNest& nest, int64_t n) {
  const int64_t limit = std::numeric_limits<int32_t>::max();
  if (n + int64_t(grid_for(n)) * kThreads > limit) return false;
  for (const Strides& strides : nest.strides) {
    int64_t reach = 0;
    for (size_t d = 0; d < nest.shape.size(); ++d) reach += (nest.shape[d] - 1) * std::abs(strides[d]);
    if (reach > limit) return false;
  }
  return true;
}

template <class Index>
Nest<Index> make_nest(const char* op, const cpu::LoopNest& loops) {
  BRIGADE_CHECK(loops.shape.size() <= size_t(kMaxDims), op, ": a GPU copy handles at most ", kMaxDims,
                " dims once contiguous dims are merged; this one has ", loops.shape.size(), " (shape ",
                shape_str(loops.shape), ")");
  Nest<Index> nest;
  nest.ndim = int(loops.shape.size());
  for (size_t d = 0; d < loops.shape.size(); ++d) {
    nest.size[d] = Index(loops.shape[d]);
    nest.dst_stride[d] = Index(loops.strides[0][d]);
    nest.src_stride[d] = loops.strides.size() > 1 ? Index(loops.strides[1][d]) : Index(0);
  }
  return nest;
}

// Calls launch(Index{}) with the narrowest index type that is safe for this loop nest.
template <class Launch>
void with_index_type(const cpu::LoopNest& loops, int64_t n, Launch&& launch) {
  if (fits_int32(loops, n)) launch(int32_t{});
  else launch(int64_t{});
}

bool all_bytes_equal(const void* value, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(value);
  return std::all_of(bytes, bytes + size, [&](unsigned char b) { return b == bytes[0]; });
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_for(dst);
  const cpu::LoopNest loops = cpu::coalesce(dst.shape(), {&dst, &src});
  if (dst.dtype() == src.dtype() && loops.shape.size() == 1 && loops.strides[0][0] == 1 && loops.strides[1][0] == 1) {
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const bool flat = loops.shape.size() == 1 && loops.strides[0][0] == 1 && loops.strides[1][0] == 1;
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      D* to = static_cast<D*>(dst.raw_data());
      const S* from = static_cast<const S*>(src.raw_data());
      const int64_t vectors = n / kConvertWidth;
      if (flat && vectors > 0 && reinterpret_cast<uintptr_t>(to) % alignof(Vector<D>) == 0 &&
          reinterpret_cast<uintptr_t>(from) % alignof(Vector<S>) == 0) {
        convert_contiguous_kernel<D, S><<<grid_for(vectors), kThreads, 0, stream>>>(to, from, vectors);
        BRIGADE_CUDA_CHECK_LAUNCH();
        const int64_t done = vectors * kConvertWidth;
        if (done == n) return;
        Nest<int32_t> tail;  // the last n % 8 elements, one per thread
        tail.ndim = 1;
        tail.size[0] = int32_t(n - done);
        tail.dst_stride[0] = tail.src_stride[0] = 1;
        copy_kernel<D, S, int32_t><<<1, kThreads, 0, stream>>>(to + done, from + done, int32_t(n - done), tail);
        BRIGADE_CUDA_CHECK_LAUNCH();
        return;
      }
      if (const std::optional<TransposeGeometry> g = transpose_geometry(loops)) return transpose_tiles(to, from, *g, stream);
      with_index_type(loops, n, [&](auto itag) {
        using Index = decltype(itag);
        copy_kernel<D, S, Index><<<grid_for(n), kThreads, 0, stream>>>(
            static_cast<D*>(dst.raw_data()), static_cast<const S*>(src.raw_data()), Index(n),
            make_nest<Index>("copy_", loops));
        BRIGADE_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

void fill(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_for(dst);
  const cpu::LoopNest loops = cpu::coalesce(dst.shape(), {&dst});
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = from_double<T>(value);  // on the host: the CPU's rounding, by construction
    if (loops.shape.size() == 1 && loops.strides[0][0] == 1 && all_bytes_equal(&v, sizeof v)) {
      unsigned char byte = 0;
      std::memcpy(&byte, &v, 1);
      BRIGADE_CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), byte, dst.nbytes(), stream));  // zeros, mostly
      return;
    }
    with_index_type(loops, n, [&](auto itag) {
      using Index = decltype(itag);
      fill_kernel<T, Index><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst.raw_data()), Index(n),
                                                                  make_nest<Index>("fill_", loops), v);
      BRIGADE_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace brigade::cuda
