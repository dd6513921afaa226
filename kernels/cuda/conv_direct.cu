// Direct 2-D convolution on the GPU (NCHW): the readable reference next to cuDNN.
//
// Output pixel (oh, ow) of channel o reads, for each input channel c and tap (kh, kw), the input
// pixel (oh * stride - padding + kh, ow * stride - padding + kw); taps that land in the padding
// read zeros and are skipped. Each kernel below computes one output value per thread (or per block)
// by walking exactly those taps:
//   - forward: y[n, o, oh, ow] = bias[o] + sum over c, kh, kw of w[o, c, kh, kw] * x[n, c, ih, iw];
//   - input gradient: the same pairs seen from the input side — x[n, c, ih, iw] was read by output
//     (oh, ow) through tap (kh, kw) iff ih + padding - kh = oh * stride (and likewise for w). Each
//     input pixel gathers its gradient from those outputs; nothing is scattered, so no atomics;
//   - weight gradient: one block per weight, its threads splitting the N * OH * OW products and
//     combining them with a fixed-order block reduction.
// The forward and input-gradient sums visit their terms in the CPU reference's order (c, kh, kw and
// o, kh, kw) with separately rounded products (mul_rn), so they reproduce it bit for bit. None of
// this is fast — cuDNN is the fast path — but every line can be checked by hand.
#include <climits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_direct.h"

namespace brigade::cuda {
namespace {

struct ConvGeometry {
  int N, C, H, W;  // input
  int O, KH, KW;   // weight
  int OH, OW;      // output
  int stride, padding;
};

// a * b rounded on its own, so nvcc does not fuse `acc + a * b` into an FMA the CPU doesn't do.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <class T>
__global__ void conv_forward(T* y, const T* x, const T* w, const T* bias, ConvGeometry g) {
  using C = compute_t<T>;
  const int64_t total = int64_t(g.N) * g.O * g.OH * g.OW;
  BRIGADE_GRID_STRIDE_LOOP(i, total, int64_t) {
    const int ow = int(i % g.OW), oh = int(i / g.OW % g.OH), o = int(i / (int64_t(g.OW) * g.OH) % g.O);
    const int n = int(i / (int64_t(g.OW) * g.OH * g.O));
    const int ih0 = oh * g.stride - g.padding, iw0 = ow * g.stride - g.padding;
    C acc = bias ? to_compute(bias[o]) : C(0);
    for (int c = 0; c < g.C; ++c) {
      const T* xp = x + (int64_t(n) * g.C + c) * g.H * g.W;
      const T* wp = w + (int64_t(o) * g.C + c) * g.KH * g.KW;
      for (int kh = 0; kh < g.KH; ++kh) {
        const int ih = ih0 + kh;
        if (ih < 0 || ih >= g.H) continue;
        for (int kw = 0; kw < g.KW; ++kw) {
          const int iw = iw0 + kw;
          if (iw < 0 || iw >= g.W) continue;
          acc += mul_rn(to_compute(wp[kh * g.KW + kw]), to_compute(xp[ih * g.W + iw]));
        }
      }
    }
    y[i] = from_compute<T>(acc);
  }
}

// The output position that read input position `i` through tap `k`, or -1: i + padding - k must be a
// non-negative multiple of stride, and the quotient a valid output position.
__device__ __forceinline__ int reader(int i, int k, int stride, int padding, int out_size) {
  const int t = i + padding - k;
  if (t < 0 || t % stride != 0) return -1;
  const int o = t / stride;
  return o < out_size ? o : -1;
}

template <class T>
__global__ void conv_backward_input(T* grad_x, const T* grad_y, const T* w, ConvGeometry g) {
  using C = compute_t<T>;
  const int64_t total = int64_t(g.N) * g.C * g.H * g.W;
  BRIGADE_GRID_STRIDE_LOOP(i, total, int64_t) {
    const int iw = int(i % g.W), ih = int(i / g.W % g.H), c = int(i / (int64_t(g.W) * g.H) % g.C);
    const int n = int(i / (int64_t(g.W) * g.H * g.C));
    C acc = 0;
    for (int o = 0; o < g.O; ++o) {
      const T* gyp = grad_y + (int64_t(n) * g.O + o) * g.OH * g.OW;
      const T* wp = w + (int64_t(o) * g.C + c) * g.KH * g.KW;
      for (int kh = 0; kh < g.KH; ++kh) {
        const int oh = reader(ih, kh, g.stride, g.padding, g.OH);
        if (oh < 0) continue;
        for (int kw = 0; kw < g.KW; ++kw) {
          const int ow = reader(iw, kw, g.stride, g.padding, g.OW);
          if (ow < 0) continue;
          acc += mul_rn(to_compute(wp[kh * g.KW + kw]), to_compute(gyp[oh * g.OW + ow]));
        }
      }
    }
    grad_x[i] = from_compute<T>(acc);
  }
}

// One block per weight element (grid-stride over them); blockDim.x must be a multiple of 32.
template <class T>
__global__ void conv_backward_weight(T* grad_w, const T* grad_y, const T* x, ConvGeometry g) {
  using C = compute_t<T>;
  const int64_t weights = int64_t(g.O) * g.C * g.KH * g.KW;
  const int64_t products = int64_t(g.N) * g.OH * g.OW;
  for (int64_t wi = blockIdx.x; wi < weights; wi += gridDim.x) {  // uniform across the block
    const int kw = int(wi % g.KW), kh = int(wi / g.KW % g.KH), c = int(wi / (int64_t(g.KW) * g.KH) % g.C);
    const int o = int(wi / (int64_t(g.KW) * g.KH * g.C));
    C acc = 0;
    for (int64_t j = threadIdx.x; j < products; j += blockDim.x) {
      const int ow = int(j % g.OW), oh = int(j / g.OW % g.OH), n = int(j / (int64_t(g.OW) * g.OH));
      const int ih = oh * g.stride - g.padding + kh, iw = ow * g.stride - g.padding + kw;
      if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
      const C dy = to_compute(grad_y[((int64_t(n) * g.O + o) * g.OH + oh) * g.OW + ow]);
      acc += dy * to_compute(x[((int64_t(n) * g.C + c) * g.H + ih) * g.W + iw]);
    }
    acc = block_reduce(acc, Sum{}, C(0));
    if (threadIdx.x == 0) grad_w[wi] = from_compute<T>(acc);
  }
}

// One block per channel o: the sum of grad_y[n, o, :, :] over n.
template <class T>
__global__ void bias_sum(T* grad_b, const T* grad_y, int N, int O, int64_t plane) {
  using C = compute_t<T>;
  for (int o = blockIdx.x; o < O; o += gridDim.x) {  // uniform across the block
    C acc = 0;
    for (int64_t j = threadIdx.x; j < int64_t(N) * plane; j += blockDim.x)
      acc += to_compute(grad_y[(j / plane * O + o) * plane + j % plane]);
    acc = block_reduce(acc, Sum{}, C(0));
    if (threadIdx.x == 0) grad_b[o] = from_compute<T>(acc);
  }
}

template <class T>
__global__ void broadcast_bias(T* y, const T* bias, int O, int64_t plane, int64_t total) {
  BRIGADE_GRID_STRIDE_LOOP(i, total, int64_t) { y[i] = bias[i / plane % O]; }
}

int checked_int(int64_t v, const char* op, const Shape& x, const Shape& w) {
  BRIGADE_CHECK(v <= INT_MAX, op, ": input ", shape_str(x), " and weight ", shape_str(w),
                " are too large for the direct CUDA kernels");
  return int(v);
}

ConvGeometry geometry(const char* op, const Shape& x, const Shape& w, const Shape& y, ops::Conv2dParams p) {
  // Indices within a plane are int; whole-tensor offsets are int64.
  for (int64_t plane : {x[2] * x[3], y[2] * y[3], w[2] * w[3]}) checked_int(plane, op, x, w);
  auto i = [&](int64_t v) { return checked_int(v, op, x, w); };
  return {i(x[0]), i(x[1]), i(x[2]), i(x[3]), i(w[0]), i(w[2]), i(w[3]), i(y[2]), i(y[3]), i(p.stride), i(p.padding)};
}

// Blocks for the one-block-per-output reductions: all of them, up to a bound the grid-stride loop
// makes harmless.
unsigned reduction_blocks(int64_t outputs) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(outputs, int64_t(1) << 20)));
}

}  // namespace

void conv2d_direct(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p) {
  const ConvGeometry g = geometry("conv2d", x.shape(), weight.shape(), y.shape(), p);
  if (y.numel() == 0) return;
  cudaStream_t stream = stream_for(y);
  visit_floating(y.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    conv_forward<T><<<grid_for(y.numel(), y.device()), kThreads, 0, stream>>>(
        y.data<T>(), x.data<T>(), weight.data<T>(), bias.defined() ? bias.data<T>() : nullptr, g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void conv2d_backward_input_direct(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight,
                                  ops::Conv2dParams p) {
  const ConvGeometry g = geometry("conv2d_backward_input", grad_x.shape(), weight.shape(), grad_y.shape(), p);
  if (grad_x.numel() == 0) return;
  cudaStream_t stream = stream_for(grad_x);
  visit_floating(grad_x.dtype(), "conv2d_backward_input", [&](auto tag) {
    using T = decltype(tag);
    conv_backward_input<T><<<grid_for(grad_x.numel(), grad_x.device()), kThreads, 0, stream>>>(
        grad_x.data<T>(), grad_y.data<T>(), weight.data<T>(), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void conv2d_backward_weight_direct(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x,
                                   ops::Conv2dParams p) {
  const ConvGeometry g = geometry("conv2d_backward_weight", x.shape(), grad_weight.shape(), grad_y.shape(), p);
  if (grad_weight.numel() == 0) return;
  cudaStream_t stream = stream_for(grad_weight);
  visit_floating(grad_weight.dtype(), "conv2d_backward_weight", [&](auto tag) {
    using T = decltype(tag);
    conv_backward_weight<T><<<reduction_blocks(grad_weight.numel()), kThreads, 0, stream>>>(
        grad_weight.data<T>(), grad_y.data<T>(), x.data<T>(), g);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void conv2d_bias_sum(const Tensor& grad_bias, const Tensor& grad_y) {
  const Shape& s = grad_y.shape();
  if (grad_bias.numel() == 0) return;
  BRIGADE_CHECK(s[0] <= INT_MAX && s[1] <= INT_MAX, "conv2d_backward_bias: grad_y shape ", shape_str(s),
                " is too large for the CUDA kernel");
  cudaStream_t stream = stream_for(grad_bias);
  visit_floating(grad_bias.dtype(), "conv2d_backward_bias", [&](auto tag) {
    using T = decltype(tag);
    bias_sum<T><<<reduction_blocks(s[1]), kThreads, 0, stream>>>(grad_bias.data<T>(), grad_y.data<T>(), int(s[0]),
                                                                 int(s[1]), s[2] * s[3]);
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

void fill_channel_bias(const Tensor& y, const Tensor& bias) {
  if (y.numel() == 0) return;
  const Shape& s = y.shape();
  cudaStream_t stream = stream_for(y);
  visit_floating(y.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    broadcast_bias<T><<<grid_for(y.numel(), y.device()), kThreads, 0, stream>>>(y.data<T>(), bias.data<T>(),
                                                                                int(s[1]), s[2] * s[3], y.numel());
    BRIGADE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace brigade::cuda
