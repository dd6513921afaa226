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
#include "kernels/cuda/kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
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
