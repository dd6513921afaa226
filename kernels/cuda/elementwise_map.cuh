// The two loops behind every CUDA elementwise kernel (the GPU twin of cpu::for_each_row's users).
//
//   map<Out, In...>(op, f, out, in...)   out[i] = f(in[i]...) for every element i of out
//
// f is a functor of compute values (f32, or f64 for f64 data) returning one. map picks the loop:
//
//   - contiguous: every operand contiguous and one dtype, each input either of out's shape or a
//     block of out's trailing dims repeated over the leading ones (a bias row [N] over [M, N], a
//     position table [T, C] over [B, T, C]: element i of it is block[i % period]). Each thread moves
//     16 bytes per operand per step (4 f32 or 8 bf16) when all pointers are 16-byte aligned and every
//     period is a whole number of vectors; otherwise the same loop runs one element at a time.
//     Elements past the last full vector are done one by one, so any size works. (A bias add through
//     the strided loop ran at a quarter of the copy bandwidth in bf16 on an H200: the index
//     arithmetic of a general layout, and 2-byte accesses.)
//   - strided: anything else (transposed, sliced, broadcast, mixed dtypes). Each element's offsets
//     come from its row-major index through a StridedLayout; broadcast operands have stride 0.
//
// Both are grid-stride loops, and every element is written by exactly one thread, so in-place use
// (out aliasing an input element for element) is safe.
#pragma once

#include <algorithm>
#include <utility>

#include "kernels/cuda/common.cuh"

namespace brigade::cuda {

template <class T, int N>
struct InputPointers {
  const T* p[N];
  int64_t period[N];  // 0: an input of out's shape; else the length of the block it repeats

  __device__ __forceinline__ const T* at(int k, int64_t i) const { return p[k] + (period[k] ? i % period[k] : i); }
};

// f(a[I]...) for a fixed-size array of arguments.
template <class F, class A, size_t... I>
__device__ __forceinline__ auto call_with(const F& f, const A* a, std::index_sequence<I...>) {
  return f(a[I]...);
}

template <int V, class F, class T, int N>
__global__ void map_contiguous_kernel(int64_t n, F f, T* out, InputPointers<T, N> in) {
  using C = compute_t<T>;
  const int64_t vectors = n / V;
  BRIGADE_GRID_STRIDE_LOOP(v, vectors, int64_t) {
    Vec<T, V> loaded[N];
    for (int k = 0; k < N; ++k) loaded[k] = load_vec<V>(in.at(k, v * V));
    Vec<T, V> result;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      C args[N];
      for (int k = 0; k < N; ++k) args[k] = to_compute(loaded[k].v[j]);
      result.v[j] = from_compute<T>(call_with(f, args, std::make_index_sequence<N>{}));
    }
    store_vec<V>(out + v * V, result);
  }
  // The tail: fewer than V elements, one per thread of the first block.
  const int64_t i = vectors * V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    C args[N];
    for (int k = 0; k < N; ++k) args[k] = to_compute(*in.at(k, i));
    out[i] = from_compute<T>(call_with(f, args, std::make_index_sequence<N>{}));
  }
}

template <class F, class Out, class... In, size_t... I>
__device__ __forceinline__ void map_one(const F& f, Out* out, const int64_t* off, std::index_sequence<I...>,
                                        const In*... in) {
  out[off[0]] = from_compute<Out>(f(to_compute(in[off[I + 1]])...));
}

template <class Index, class F, class Out, class... In>
__global__ void map_strided_kernel(Index n, StridedLayout<1 + sizeof...(In)> layout, F f, Out* out, const In*... in) {
  BRIGADE_GRID_STRIDE_LOOP(i, n, Index) {
    int64_t off[1 + sizeof...(In)];
    layout.offsets(i, off);
    map_one(f, out, off, std::index_sequence_for<In...>{}, in...);
  }
}

// How the contiguous loop reads `in` for `out`: 0 when it has out's shape, the block's length when it
// is a contiguous block of out's trailing dims (its shape, leading 1s dropped, equals out's last
// dims), -1 when only the strided loop can read it.
inline int64_t repeat_period(const Tensor& in, const Tensor& out) {
  if (!in.is_contiguous()) return -1;
  if (in.shape() == out.shape()) return 0;
  int64_t first = 0;  // in's first dim that is not a leading 1
  while (first < in.dim() && in.size(first) == 1) ++first;
  const int64_t dims = in.dim() - first;
  if (dims == 0 || dims > out.dim()) return -1;
  for (int64_t d = 0; d < dims; ++d)
    if (in.size(first + d) != out.size(out.dim() - dims + d)) return -1;
  return in.numel();
}

// out[i] = f(in[i]...): Out and In... are the storage types of out and each input (which must match
// the tensors' dtypes); inputs broadcast to out's shape.
template <class Out, class... In, class F, class... Tensors>
void map(const char* op, const F& f, const Tensor& out, const Tensors&... in) {
  static_assert(sizeof...(In) == sizeof...(Tensors), "one storage type per input");
  constexpr int N = int(sizeof...(In));
  const int64_t n = out.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_for(out);
  const Device device = out.device();
  Out* out_ptr = static_cast<Out*>(out.raw_data());

  if constexpr ((std::is_same_v<Out, In> && ...)) {
    const InputPointers<Out, N> ptrs{{static_cast<const In*>(in.raw_data())...}, {repeat_period(in, out)...}};
    const int64_t* periods = ptrs.period;
    const bool flat = out.is_contiguous() && std::all_of(periods, periods + N, [](int64_t p) { return p >= 0; });
    if (flat) {
      constexpr int V = kVecWidth<Out>;
      const bool aligned = is_aligned(out_ptr, 16) && (is_aligned(in.raw_data(), 16) && ...) &&
                           std::all_of(periods, periods + N, [](int64_t p) { return p % V == 0; });
      if (aligned) {
        map_contiguous_kernel<V><<<grid_for(ceil_div(n, V), device), kThreads, 0, stream>>>(n, f, out_ptr, ptrs);
      } else {
        map_contiguous_kernel<1><<<grid_for(n, device), kThreads, 0, stream>>>(n, f, out_ptr, ptrs);
      }
      BRIGADE_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  const StridedLayout<N + 1> layout = make_layout<N + 1>(op, out.shape(), {&out, &in...});
  if (n <= int64_t(INT32_MAX)) {
    map_strided_kernel<uint32_t><<<grid_for(n, device), kThreads, 0, stream>>>(
        uint32_t(n), layout, f, out_ptr, static_cast<const In*>(in.raw_data())...);
  } else {
    map_strided_kernel<uint64_t><<<grid_for(n, device), kThreads, 0, stream>>>(
        uint64_t(n), layout, f, out_ptr, static_cast<const In*>(in.raw_data())...);
  }
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace brigade::cuda
