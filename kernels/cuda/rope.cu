// CUDA kernel: rotary position embedding. One thread per pair (i, i + D/2) of a (b, h, t) row: it
// reads its two elements and the row's cos and sin, and writes the two turned elements — a single
// pass over x, as a copy would make. Consecutive threads take consecutive i, so the reads and writes
// of a warp are coalesced along the head dim; the [T, D/2] table is shared by every (b, h) and stays
// in L2. Being its own pass beside the fused attention (rather than inside it) costs one read and
// write of q and k, small next to attention's own traffic, and keeps the attention kernels unchanged.
//
// On the GPU (the contract both backends share: kernels/twins/rope.inc): x any strides, f32, f64,
// bf16 or f16; the table in the compute dtype (f32, f64 for f64), made on the host in f64
// (kernels/rope.cpp), so both backends turn by the same cos and sin.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.h"

namespace brigade::cuda {
namespace {

struct RopeShape {
  int64_t heads, positions, half;  // H, T, D/2
  int64_t stride[4];               // x's, in elements
};

template <class T>
__global__ void rope_kernel(T* y, const T* x, const compute_t<T>* cos, const compute_t<T>* sin, RopeShape s,
                            int64_t pairs, compute_t<T> sign) {
  using C = compute_t<T>;
  BRIGADE_GRID_STRIDE_LOOP(k, pairs, int64_t) {
    const int64_t i = k % s.half, row = k / s.half;
    const int64_t t = row % s.positions, h = row / s.positions % s.heads, b = row / s.positions / s.heads;
    const T* xr = x + b * s.stride[0] + h * s.stride[1] + t * s.stride[2];
    const C a = to_compute(xr[i * s.stride[3]]), a2 = to_compute(xr[(i + s.half) * s.stride[3]]);
    const C c = cos[t * s.half + i], sn = sign * sin[t * s.half + i];
    T* yr = y + row * 2 * s.half;
    yr[i] = from_compute<T>(a * c - a2 * sn);
    yr[i + s.half] = from_compute<T>(a2 * c + a * sn);
  }
}

}  // namespace

void rope(const Tensor& y, const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  const int64_t pairs = x.numel() / 2;
  if (pairs == 0) return;
  const RopeShape s{x.size(1), x.size(2), x.size(3) / 2, {x.stride(0), x.stride(1), x.stride(2), x.stride(3)}};
  visit_floating(x.dtype(), "rope", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    rope_kernel<T><<<grid_for(pairs, x.device()), kThreads, 0, stream_for(x)>>>(
        static_cast<T*>(y.raw_data()), static_cast<const T*>(x.raw_data()), static_cast<const C*>(cos.raw_data()),
        static_cast<const C*>(sin.raw_data()), s, pairs, inverse ? C(-1) : C(1));
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
