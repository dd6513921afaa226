// CUDA kernels: sum/mean and max/argmax over dims, and max's backward scatter.
//
// As on the CPU (kernels/cpu/reduce.cpp), a reduction sees x as two loop nests: the kept dims (one
// output each) and the reduced dims (folded into that output). Which threads share an output
// depends on which nest walks memory faster:
//
//   rows     the reduced elements are neighbours (sum over the last dim): one warp per output. Its
//            32 lanes read 32 neighbouring elements per step, then combine with shuffles.
//   columns  the outputs are neighbours (sum over dim 0 of [M, N]): one thread per output, so a warp
//            reads one 128-byte line per step; a block's 8 warps split the reduced elements between
//            them and combine through shared memory.
//
// When the outputs are too few to fill the GPU (a whole tensor summed to a scalar), the reduced
// range is also cut into chunks: the first kernel writes one partial result per (chunk, output) to
// scratch memory and a second kernel combines them. Every split — lanes, warps, chunks — is fixed by
// the shapes alone and every combine runs in a fixed order, so a result has the same bits on every
// run and every GPU. No float atomics.
//
// On the GPU (the contract both backends share: kernels/twins/reduce.inc):
// Deterministic: every output's terms are combined in an order fixed by the shapes alone (no float
// atomics), so repeated runs give the same bits. The order differs from the CPU's, so the two agree
// to rounding, not bitwise.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace brigade::cuda {
namespace {

// Blocks are (32, kRowsPerBlock) threads: kRowsPerBlock warps, one output each in the row kernel; in
// the column kernel, kRowsPerBlock threads share each output.

// Chunking targets, as constants rather than from the SM count so results don't depend on the GPU:
// about 8192 warps in flight fills an H200 (132 SMs x 64 warps) and is harmless on smaller parts.
constexpr int64_t kTargetWarps = 8192;
constexpr int64_t kTargetColumnBlocks = kTargetWarps / kRowsPerBlock;
constexpr int64_t kMinRowChunk = 1024;   // a chunk gives each lane at least 32 elements
constexpr int64_t kMinColumnChunk = 64;  // ... and each thread of a column block at least 8
constexpr int64_t kMaxChunks = 65535;    // gridDim.y's limit

// ---- what a reduction computes: one policy per kind ----
// identity() starts an output, load() turns element `index` of the reduced range into an
// accumulator, operator() combines two accumulators (associative and commutative, so any fixed
// order is valid), store() writes output o.

template <class T>
struct SumOp {
  using In = T;
  using Acc = compute_t<T>;  // 16-bit inputs sum in f32
  T* out;
  double scale;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc load(T v, int64_t) const { return to_compute(v); }
  __device__ Acc operator()(Acc a, Acc b) const { return a + b; }
  __device__ void store(int64_t o, Acc acc) const { out[o] = from_compute<T>(compute_t<T>(double(acc) * scale)); }
};

// A candidate maximum and where it was found; index < 0 marks "nothing seen yet".
template <class V>
struct ValueIndex {
  V value;
  int64_t index;
};

template <class V>
__device__ __forceinline__ ValueIndex<V> shfl_xor(ValueIndex<V> v, int mask) {
  return {__shfl_xor_sync(kFullMask, v.value, mask), __shfl_xor_sync(kFullMask, v.index, mask)};
}

// Maxima compare in the compute type (bf16/f16 widen exactly); integers compare as themselves.
template <class T> struct MaxValue { using type = compute_t<T>; };
template <> struct MaxValue<int32_t> { using type = int32_t; };
template <> struct MaxValue<int64_t> { using type = int64_t; };

template <class T>
struct ArgMaxOp {
  using In = T;
  using V = typename MaxValue<T>::type;
  using Acc = ValueIndex<V>;
  T* values;
  int64_t* indices;

  __device__ Acc identity() const { return {V(0), -1}; }
  __device__ Acc load(T v, int64_t index) const {
    if constexpr (std::is_integral_v<T>) return {v, index};
    else return {to_compute(v), index};
  }
  // The larger value wins; NaN beats every number; ties (and two NaNs) go to the smaller index, so
  // the result is the CPU's "first maximum" whatever order the candidates meet in.
  __device__ Acc operator()(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
  __device__ void store(int64_t o, Acc acc) const {
    if constexpr (std::is_integral_v<T>) values[o] = acc.value;
    else values[o] = from_compute<T>(acc.value);  // exact: the value came from a T
    indices[o] = acc.index;
  }
};

// ---- the kernels ----
// Both take the chunk length and write either the final output (partial == nullptr) or partial
// results laid out [chunk][output].

template <class Op, class Index>
__global__ void reduce_rows_kernel(Op op, const typename Op::In* x, StridedLayout<1> kept, StridedLayout<1> reduced,
                                   Index outputs, Index length, Index chunk, typename Op::Acc* partial) {
  // blockDim = (32, kRowsPerBlock): warp threadIdx.y of the block owns output o.
  const Index o = Index(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (o >= outputs) return;  // the whole warp leaves together
  int64_t base[1];
  kept.offsets(o, base);
  const Index begin = Index(blockIdx.y) * chunk;
  const Index end = length - begin < chunk ? length : begin + chunk;
  typename Op::Acc acc = op.identity();
  for (Index r = begin + threadIdx.x; r < end; r += kWarp) {
    int64_t off[1];
    reduced.offsets(r, off);
    acc = op(acc, op.load(x[base[0] + off[0]], int64_t(r)));
  }
  acc = warp_reduce(acc, op);
  if (threadIdx.x == 0) {
    if (partial) partial[int64_t(blockIdx.y) * int64_t(outputs) + int64_t(o)] = acc;
    else op.store(int64_t(o), acc);
  }
}

template <class Op, class Index>
__global__ void reduce_columns_kernel(Op op, const typename Op::In* x, StridedLayout<1> kept,
                                      StridedLayout<1> reduced, Index outputs, Index length, Index chunk,
                                      typename Op::Acc* partial) {
  using Acc = typename Op::Acc;
  __shared__ Acc rows[kRowsPerBlock][kWarp];
  // blockDim = (32, kRowsPerBlock): thread (tx, ty) owns output o and every kRowsPerBlock-th element.
  const Index o = Index(blockIdx.x) * kWarp + threadIdx.x;
  const Index begin = Index(blockIdx.y) * chunk;
  const Index end = length - begin < chunk ? length : begin + chunk;
  Acc acc = op.identity();
  if (o < outputs) {
    int64_t base[1];
    kept.offsets(o, base);
    for (Index r = begin + threadIdx.y; r < end; r += kRowsPerBlock) {
      int64_t off[1];
      reduced.offsets(r, off);
      acc = op(acc, op.load(x[base[0] + off[0]], int64_t(r)));
    }
  }
  rows[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && o < outputs) {
    for (int k = 1; k < kRowsPerBlock; ++k) acc = op(acc, rows[k][threadIdx.x]);
    if (partial) partial[int64_t(blockIdx.y) * int64_t(outputs) + int64_t(o)] = acc;
    else op.store(int64_t(o), acc);
  }
}

// Second pass: one warp per output combines its chunks' partial results.
template <class Op>
__global__ void combine_partials_kernel(Op op, const typename Op::Acc* partial, int64_t outputs, int64_t chunks) {
  const int64_t o = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (o >= outputs) return;
  typename Op::Acc acc = op.identity();
  for (int64_t c = threadIdx.x; c < chunks; c += kWarp) acc = op(acc, partial[c * outputs + o]);
  acc = warp_reduce(acc, op);
  if (threadIdx.x == 0) op.store(o, acc);
}

// ---- host side ----

// x's dims as the two nests, size-1 dims dropped and back-to-back neighbours of one kind merged
// (as cpu::reduce's split_dims). The innermost strides decide between the row and column kernels.
struct Nests {
  StridedLayout<1> kept, reduced;
  int64_t outputs = 1, length = 1;
  bool columns = false;
};

Nests split_dims(const char* op, const Tensor& x, const std::vector<bool>& reduced) {
  Shape sizes[2];
  Strides strides[2];
  int last_kind = -1;  // the kind of the previous dim kept in a nest: 0 kept, 1 reduced
  for (size_t d = 0; d < size_t(x.dim()); ++d) {
    const int64_t size = x.shape()[d], stride = x.strides()[d];
    if (size == 1) continue;
    const int kind = reduced[d] ? 1 : 0;
    if (kind == last_kind && strides[kind].back() == stride * size) {
      sizes[kind].back() *= size;
      strides[kind].back() = stride;
    } else {
      sizes[kind].push_back(size);
      strides[kind].push_back(stride);
    }
    last_kind = kind;
  }
  Nests n;
  StridedLayout<1>* layouts[2] = {&n.kept, &n.reduced};
  for (int kind = 0; kind < 2; ++kind) {
    BRIGADE_CHECK(sizes[kind].size() <= size_t(kMaxDims), op, ": the CUDA kernels take at most ", kMaxDims,
                  kind ? " reduced" : " kept", " dims that cannot be merged; input has shape ", shape_str(x.shape()),
                  " and strides ", shape_str(x.strides()), " (make it contiguous first)");
    layouts[kind]->ndim = int(sizes[kind].size());
    for (size_t d = 0; d < sizes[kind].size(); ++d) {
      layouts[kind]->sizes[d] = sizes[kind][d];
      layouts[kind]->strides[0][d] = strides[kind][d];
    }
  }
  n.outputs = shape_numel(sizes[0]);
  n.length = shape_numel(sizes[1]);
  // Threads per output when neighbouring outputs are at least as close as neighbouring terms.
  n.columns = !sizes[0].empty() && (sizes[1].empty() || std::abs(strides[0].back()) <= std::abs(strides[1].back()));
  return n;
}

template <class Op, class Index>
void launch_reduction(const Op& op, const Tensor& x, const Nests& n) {
  using Acc = typename Op::Acc;
  const auto* in = static_cast<const typename Op::In*>(x.raw_data());
  cudaStream_t stream = stream_for(x);

  // Enough chunks to reach the target parallelism, but never chunks too short to be worth a pass.
  const int64_t units = n.columns ? ceil_div(n.outputs, kWarp) : n.outputs;
  const int64_t target = n.columns ? kTargetColumnBlocks : kTargetWarps;
  const int64_t min_chunk = n.columns ? kMinColumnChunk : kMinRowChunk;
  int64_t chunks = std::clamp<int64_t>(std::min(ceil_div(target, units), n.length / min_chunk), 1, kMaxChunks);
  const int64_t chunk = chunks == 1 ? n.length : ceil_div(n.length, chunks);
  if (chunks > 1) chunks = ceil_div(n.length, chunk);

  Tensor scratch_memory;
  Acc* partial = nullptr;
  if (chunks > 1) {
    scratch_memory = scratch(x.device(), sizeof(Acc) * size_t(chunks) * size_t(n.outputs));
    partial = static_cast<Acc*>(scratch_memory.raw_data());
  }
  const dim3 block(kWarp, kRowsPerBlock);
  if (n.columns) {
    const dim3 grid(unsigned(ceil_div(n.outputs, kWarp)), unsigned(chunks));
    reduce_columns_kernel<Op, Index><<<grid, block, 0, stream>>>(op, in, n.kept, n.reduced, Index(n.outputs),
                                                                 Index(n.length), Index(chunk), partial);
  } else {
    const dim3 grid(unsigned(ceil_div(n.outputs, kRowsPerBlock)), unsigned(chunks));
    reduce_rows_kernel<Op, Index><<<grid, block, 0, stream>>>(op, in, n.kept, n.reduced, Index(n.outputs),
                                                              Index(n.length), Index(chunk), partial);
  }
  BRIGADE_CUDA_CHECK_LAUNCH();
  if (partial) {
    const dim3 grid(unsigned(ceil_div(n.outputs, kRowsPerBlock)));
    combine_partials_kernel<Op><<<grid, block, 0, stream>>>(op, partial, n.outputs, chunks);
    BRIGADE_CUDA_CHECK_LAUNCH();
  }
}

template <class Op>
void reduce(const char* name, const Op& op, const Tensor& x, const std::vector<bool>& reduced) {
  const Nests n = split_dims(name, x, reduced);
  if (n.outputs == 0) return;
  // 32-bit index arithmetic when both nests allow it (offsets themselves are always 64-bit).
  if (n.outputs <= INT32_MAX && n.length <= INT32_MAX) launch_reduction<Op, uint32_t>(op, x, n);
  else launch_reduction<Op, uint64_t>(op, x, n);
}

// ---- max_backward: each gradient element lands on its argmax; the targets are all distinct ----

template <class Index, class Bits>
__global__ void max_backward_kernel(Index n, StridedLayout<3> layout, int64_t step, Bits* grad_x, const Bits* grad,
                                    const int64_t* indices) {
  BRIGADE_GRID_STRIDE_LOOP(i, n, Index) {
    int64_t off[3];
    layout.offsets(i, off);
    grad_x[off[0] + indices[off[2]] * step] = grad[off[1]];
  }
}

template <class Bits>
void max_backward_bits(const Tensor& grad_x, const Tensor& grad, const Tensor& indices, int64_t dim) {
  const int64_t n = grad.numel();
  if (n == 0) return;
  // grad_x seen with grad's shape (dim of size 1) at grad_x's strides: element p's position when
  // its index is 0; the index then moves it along dim.
  const Tensor target = make_view(grad_x, grad.shape(), grad_x.strides(), grad_x.offset());
  const StridedLayout<3> layout = make_layout<3>("max_backward", grad.shape(), {&target, &grad, &indices});
  const int64_t step = grad_x.strides()[size_t(dim)];
  auto* gx = static_cast<Bits*>(grad_x.raw_data());
  const auto* g = static_cast<const Bits*>(grad.raw_data());
  const auto* idx = static_cast<const int64_t*>(indices.raw_data());
  cudaStream_t stream = stream_for(grad_x);
  if (n <= int64_t(INT32_MAX)) {
    max_backward_kernel<uint32_t><<<grid_for(n, grad_x.device()), kThreads, 0, stream>>>(uint32_t(n), layout, step,
                                                                                         gx, g, idx);
  } else {
    max_backward_kernel<uint64_t><<<grid_for(n, grad_x.device()), kThreads, 0, stream>>>(uint64_t(n), layout, step,
                                                                                         gx, g, idx);
  }
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void sum(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double scale) {
  visit_floating(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    reduce("sum", SumOp<T>{static_cast<T*>(out.raw_data()), scale}, x, reduced);
  });
}

void max(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim) {
  std::vector<bool> reduced(size_t(x.dim()), false);
  if (x.dim() > 0) reduced[size_t(dim)] = true;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    reduce("max", ArgMaxOp<T>{static_cast<T*>(values.raw_data()), indices.data<int64_t>()}, x, reduced);
  });
}

void max_backward(const Tensor& grad_x, const Tensor& grad, const Tensor& indices, int64_t dim) {
  switch (grad_x.element_size()) {
    case 2: return max_backward_bits<uint16_t>(grad_x, grad, indices, dim);
    case 4: return max_backward_bits<uint32_t>(grad_x, grad, indices, dim);
    case 8: return max_backward_bits<uint64_t>(grad_x, grad, indices, dim);
    default: fail("max_backward: unsupported element size ", grad_x.element_size());
  }
}

}  // namespace brigade::cuda
