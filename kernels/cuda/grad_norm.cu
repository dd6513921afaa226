// CUDA kernels: the global norm of many tensors (the gradients, for clipping), and scaling them all
// by a factor the device computes from that norm — a few launches for the whole model, and no
// wait for the host (so a clipped step can be captured as a CUDA graph).
//
// The sum of squares has the bits of the per-tensor composition it replaces, the pipeline's and
// optim's before (ops::sum of to_dtype(g, f64) squared, added tensor after tensor from 0): each
// tensor's elements are summed in the very order kernels/cuda/reduce.cu's whole-tensor sum uses —
// the same chunks (one warp each, lanes striding by 32, a shuffle tree), the same second pass over
// the chunks — and the per-tensor sums are added up in list order. The scaling is scale_'s
// arithmetic, x * C(factor) + C(0) in the compute type.
//
// Contiguous tensors go into tables of up to kMaxTensors, one launch per table, as AdamW's
// (kernels/cuda/adamw.cu); the op layer handles strided ones the composed way.
#include <cfloat>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/optimizer_kernels.h"

namespace brigade::cuda {
namespace {

constexpr int kMaxTensors = 48;
constexpr int kMaxSums = 480;           // tensors per launch of the adding-up kernel (its offsets: < 4 KB)
constexpr int kSumWarps = 8;            // warps per block of the squares kernel: one chunk each
constexpr int64_t kScaleChunk = 16384;  // elements per block of the scaling kernel

// reduce.cu's chunking of a whole-tensor sum of n elements (one output, the row kernel): about 8192
// warps, no chunk under 1024 elements, at most 65535 chunks. Returns the chunk length.
int64_t sum_chunk(int64_t n, int64_t* chunks) {
  constexpr int64_t kTargetWarps = 8192, kMinRowChunk = 1024, kMaxChunks = 65535;
  int64_t c = std::clamp<int64_t>(std::min(kTargetWarps, n / kMinRowChunk), 1, kMaxChunks);
  const int64_t chunk = c == 1 ? n : ceil_div(n, c);
  if (c > 1) c = ceil_div(n, chunk);
  *chunks = c;
  return chunk;
}

template <class T>
struct SquaresTable {
  const T* data[kMaxTensors];
  int64_t numel[kMaxTensors];
  int64_t chunk[kMaxTensors];            // elements per chunk of tensor t
  int64_t first_chunk[kMaxTensors + 1];  // tensor t owns chunks [first_chunk[t], first_chunk[t + 1]) of the table
  int64_t first_partial[kMaxTensors];    // where its chunks' sums go in the partials array
  int count;
};
static_assert(sizeof(SquaresTable<double>) < 4000);

// One warp per chunk: the chunk's squares in f64, summed as reduce_rows_kernel sums.
template <class T>
__global__ void squares_kernel(SquaresTable<T> table, int64_t chunks, double* partial) {
  const int64_t c = int64_t(blockIdx.x) * kSumWarps + threadIdx.y;
  if (c >= chunks) return;  // the whole warp leaves together
  int t = 0;
  while (c >= table.first_chunk[t + 1]) ++t;
  const int64_t begin = (c - table.first_chunk[t]) * table.chunk[t];
  const int64_t end = table.numel[t] - begin < table.chunk[t] ? table.numel[t] : begin + table.chunk[t];
  const T* x = table.data[t];
  double acc = 0;
  for (int64_t r = begin + threadIdx.x; r < end; r += kWarp) {
    const double v = double(to_compute(x[r]));
    acc = acc + __dmul_rn(v, v);  // rounded product, as the composition's mul kernel: never fused into an FMA
  }
  acc = warp_reduce(acc, Sum{});
  if (threadIdx.x == 0) partial[table.first_partial[t] + (c - table.first_chunk[t])] = acc;
}

// Where tensors' chunk sums lie in the partials array: tensor t's are [first[t], first[t + 1]).
struct SumsTable {
  int64_t first[kMaxSums + 1];
  int count;
  bool start;  // the first table of the list: the total starts from 0, not from *out
};
static_assert(sizeof(SumsTable) < 4000);

// One warp: each tensor's chunk sums combined as combine_partials_kernel combines them, then added
// to the total in list order (a list longer than kMaxSums carries the total over in *out).
__global__ void sum_partials_kernel(SumsTable table, const double* partial, double* out) {
  double total = table.start ? 0.0 : *out;
  for (int t = 0; t < table.count; ++t) {
    double acc = 0;
    for (int64_t c = table.first[t] + threadIdx.x; c < table.first[t + 1]; c += kWarp) acc = acc + partial[c];
    acc = warp_reduce(acc, Sum{});
    total = total + acc;
  }
  if (threadIdx.x == 0) *out = total;
}

template <class T>
struct ScaleTable {
  T* data[kMaxTensors];
  int64_t numel[kMaxTensors];
  int64_t first_chunk[kMaxTensors + 1];
  int count;
};

// Every tensor times max_norm / (sqrt(*sum_of_squares) + 1e-6), when the norm is finite and that
// factor is below 1 (optim/clip_grad.h's rule, decided here rather than on the host).
template <class T>
__global__ void clip_kernel(ScaleTable<T> table, const double* sum_of_squares, double max_norm) {
  using C = compute_t<T>;
  const double norm = sqrt(*sum_of_squares);
  if (!(norm <= DBL_MAX)) return;  // inf or NaN: the gradients stay as they are
  const double factor = max_norm / (norm + 1e-6);
  if (!(factor < 1)) return;
  const int64_t chunk = blockIdx.x;
  int t = 0;
  while (chunk >= table.first_chunk[t + 1]) ++t;
  const int64_t begin = (chunk - table.first_chunk[t]) * kScaleChunk;
  const int64_t end = begin + kScaleChunk < table.numel[t] ? begin + kScaleChunk : table.numel[t];
  T* x = table.data[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    x[i] = from_compute<T>(to_compute(x[i]) * C(factor) + C(0));
}

template <class T>
void squares_of(const std::vector<Tensor>& tensors, const std::vector<int64_t>& first_partial, double* partial,
                cudaStream_t stream) {
  SquaresTable<T> table{};  // zeroed: no stale addresses in unused slots (the emulator reads them)
  const auto launch = [&] {
    const int64_t chunks = table.first_chunk[table.count];
    if (table.count > 0 && chunks > 0) {
      squares_kernel<T><<<unsigned(ceil_div(chunks, kSumWarps)), dim3(kWarp, kSumWarps), 0, stream>>>(table, chunks,
                                                                                                       partial);
      BRIGADE_CUDA_CHECK_LAUNCH();
    }
    table.count = 0;
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != dtype_of<T>() || tensors[i].numel() == 0) continue;
    const int k = table.count++;
    int64_t chunks = 0;
    table.data[k] = static_cast<const T*>(tensors[i].raw_data());
    table.numel[k] = tensors[i].numel();
    table.chunk[k] = sum_chunk(table.numel[k], &chunks);
    table.first_chunk[k + 1] = table.first_chunk[k] + chunks;
    table.first_partial[k] = first_partial[i];
    if (table.count == kMaxTensors) launch();
  }
  launch();
}

template <class T>
void clip_of(const std::vector<Tensor>& tensors, const double* sum_of_squares, double max_norm, cudaStream_t stream) {
  ScaleTable<T> table{};
  const auto launch = [&] {
    const int64_t chunks = table.first_chunk[table.count];
    if (table.count > 0 && chunks > 0) {
      clip_kernel<T><<<unsigned(chunks), kThreads, 0, stream>>>(table, sum_of_squares, max_norm);
      BRIGADE_CUDA_CHECK_LAUNCH();
    }
    table.count = 0;
  };
  for (const Tensor& x : tensors) {
    if (x.dtype() != dtype_of<T>() || x.numel() == 0) continue;
    const int k = table.count++;
    table.data[k] = static_cast<T*>(x.raw_data());
    table.numel[k] = x.numel();
    table.first_chunk[k + 1] = table.first_chunk[k] + ceil_div(x.numel(), kScaleChunk);
    if (table.count == kMaxTensors) launch();
  }
  launch();
}

}  // namespace

void sum_of_squares(const Tensor& out, const std::vector<Tensor>& tensors) {
  cudaStream_t stream = stream_for(out);
  // Where each tensor's chunk sums go: one array for the whole list, so one pass adds them up in order.
  std::vector<int64_t> first_partial(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t chunks = 0;
    if (tensors[i].numel() > 0) sum_chunk(tensors[i].numel(), &chunks);
    first_partial[i + 1] = first_partial[i] + chunks;
  }
  const Tensor memory = scratch(out.device(), sizeof(double) * size_t(std::max<int64_t>(first_partial.back(), 1)));
  auto* partial = static_cast<double*>(memory.raw_data());
  squares_of<float>(tensors, first_partial, partial, stream);
  squares_of<double>(tensors, first_partial, partial, stream);
  squares_of<bf16>(tensors, first_partial, partial, stream);
  squares_of<f16>(tensors, first_partial, partial, stream);
  auto* total = static_cast<double*>(out.raw_data());
  for (size_t first = 0; first == 0 || first < tensors.size(); first += kMaxSums) {
    SumsTable table{};
    table.count = int(std::min<size_t>(kMaxSums, tensors.size() - first));
    table.start = first == 0;
    for (int t = 0; t <= table.count; ++t) table.first[t] = first_partial[first + size_t(t)];
    sum_partials_kernel<<<1, kWarp, 0, stream>>>(table, partial, total);
    BRIGADE_CUDA_CHECK_LAUNCH();
  }
}

void clip_by_norm(const std::vector<Tensor>& tensors, const Tensor& sum_of_squares, double max_norm) {
  if (tensors.empty()) return;
  cudaStream_t stream = stream_for(sum_of_squares);
  const auto* s = static_cast<const double*>(sum_of_squares.raw_data());
  clip_of<float>(tensors, s, max_norm, stream);
  clip_of<double>(tensors, s, max_norm, stream);
  clip_of<bf16>(tensors, s, max_norm, stream);
  clip_of<f16>(tensors, s, max_norm, stream);
}

}  // namespace brigade::cuda
