// Random tensors on a GPU: thread i computes element i from (seed, first + i) with the functions of
// core/philox.h — the very code the CPU loop in core/rng.cpp runs — so both produce the same bits.
#include "core/cuda/rng.h"

#include <algorithm>

#include "core/cuda/capture.h"
#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "core/cuda/element.cuh"
#include "core/philox.h"

namespace brigade::cuda {
namespace {

struct NormalSample {
  __device__ double operator()(uint64_t seed, uint64_t counter) const { return philox::normal(seed, counter); }
};

struct UniformSample {
  double low, high;
  __device__ double operator()(uint64_t seed, uint64_t counter) const {
    return philox::uniform(seed, counter, low, high);
  }
};

// The next representable value below v, as step_down in core/rng.cpp.
template <class T>
__device__ T step_down(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return nextafterf(v, -INFINITY);
  } else if constexpr (std::is_same_v<T, double>) {
    return nextafter(v, -double(INFINITY));
  } else {  // bf16 / f16: sign-magnitude bit patterns
    T out = v;
    if (v.bits == 0x0000) out.bits = 0x8001;
    else if (v.bits & 0x8000) out.bits = uint16_t(v.bits + 1);
    else out.bits = uint16_t(v.bits - 1);
    return out;
  }
}

template <class T, class Sample>
__global__ void fill_random_kernel(T* out, int64_t n, uint64_t seed, uint64_t first, Sample sample, double upper) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    T v = element::from_double<T>(sample(seed, first + uint64_t(i)));
    while (element::to_double(v) >= upper) v = step_down(v);
    out[i] = v;
  }
}

template <class Sample>
void launch_fill_random(const char* op, const Tensor& out, uint64_t seed, uint64_t first, Sample sample, double upper) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_for(out);
  refuse_in_capture(op, stream, "the seed and offset are chosen on the host at each call, so every replay would "
                                "draw the same numbers");
  // Grid-stride loop: enough blocks to fill the GPU many times over, never more than needed. Each
  // element costs a few hundred double operations, so occupancy matters more than launch width.
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65536);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bf16> ||
                  std::is_same_v<T, f16>) {
      fill_random_kernel<T><<<unsigned(blocks), threads, 0, stream>>>(static_cast<T*>(out.raw_data()), n, seed,
                                                                       first, sample, upper);
      BRIGADE_CUDA_CHECK_LAUNCH();
    } else {
      fail(op, ": dtype must be floating point, got ", dtype_name(out.dtype()));
    }
  });
}

}  // namespace

void fill_normal(const Tensor& out, uint64_t seed, uint64_t first) {
  launch_fill_random("randn", out, seed, first, NormalSample{}, double(INFINITY));
}

void fill_uniform(const Tensor& out, uint64_t seed, uint64_t first, double low, double high) {
  launch_fill_random("uniform", out, seed, first, UniformSample{low, high}, high);
}

}  // namespace brigade::cuda
