// The emulated cuDNN's three convolution calls: cudnnConvolutionForward, cudnnConvolutionBackwardData
// and cudnnConvolutionBackwardFilter.
//
// Each call works as cuDNN's does: the arguments are checked on the host and a bad one returns its
// status at once; the computation is then queued on the handle's stream (brigade::emu::enqueue) and
// runs after everything issued there before. Faults found while it runs — an operand that is host
// memory or runs past its allocation — are what a GPU reports as an illegal address: the next
// synchronising CUDA call returns cudaErrorLaunchFailure with the text.
//
// Semantics (cuDNN API reference, cudnn_cnn library, the three functions and "cudnnConvolutionMode_t"):
//   - tensors are read and written exactly at the elements their descriptors' strides state, so
//     padding between rows, channels or images is never touched;
//   - CUDNN_CROSS_CORRELATION applies the filter as stored; CUDNN_CONVOLUTION flips it in h and w;
//   - out = alpha * op(inputs) + beta * out, where beta == 0 means `out` is not read (it may hold
//     NaN); alpha and beta point to doubles for double data and to floats otherwise;
//   - sums are accumulated in f32 (f64 for double data) in a fixed order, whatever the algorithm, and
//     16-bit results are rounded once, to nearest even (cuda_fp16.h / cuda_bf16.h conversions).
// What the algorithms change is only what they accept and the workspace they need
// (cudnn_algorithms.cpp). The emulation writes garbage over the workspace, because its contents are
// undefined after a call. Not modeled: TF32 or reduced-precision rounding of tensor-op math types,
// the real kernels' summation orders, and cudnnConvolutionBiasActivationForward.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "emulator/cudnn_emulated.h"
#include "emulator/runtime.h"

namespace brigade::emu::dnn {
namespace {

// ---- element access ----

inline float widen(float v) { return v; }
inline double widen(double v) { return v; }
inline float widen(__half v) { return __half2float(v); }
inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
inline void narrow(float v, float* out) { *out = v; }
inline void narrow(double v, double* out) { *out = v; }
inline void narrow(float v, __half* out) { *out = __float2half_rn(v); }
inline void narrow(float v, __nv_bfloat16* out) { *out = __float2bfloat16_rn(v); }

template <class T>
using Accumulator = std::conditional_t<std::is_same_v<T, double>, double, float>;

struct Scales {
  double alpha, beta;  // exactly the float or double the caller passed
};

// out = alpha * sum + beta * out; with beta == 0 the old value is not read.
template <class T>
void blend(T* out, Accumulator<T> sum, const Scales& scales) {
  using A = Accumulator<T>;
  A value = A(scales.alpha) * sum;
  if (scales.beta != 0) value += A(scales.beta) * widen(*out);
  narrow(value, out);
}

int64_t offset(const int64_t* stride, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
}

// The stored filter row (or column) that logical tap `i` of `size` uses: flipped for CONVOLUTION.
int64_t tap(const Problem& p, int64_t i, int64_t size) { return p.mode == CUDNN_CONVOLUTION ? size - 1 - i : i; }

// ---- the three computations ----

// y[n, k, oh, ow] = sum over c, r, s of x[n, group(k) * C/g + c, oh*u - pad + r*dil, ...] * w[k, c, r', s'].
template <class T>
void forward(const Problem& p, const T* x, const T* w, T* y, const Scales& scales) {
  const int64_t cg = p.channels_per_group(), kg = p.k / p.groups;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t oh = 0; oh < p.out_h; ++oh)
        for (int64_t ow = 0; ow < p.out_w; ++ow) {
          Accumulator<T> sum = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < p.r; ++r) {
              const int64_t ih = oh * p.stride[0] - p.pad[0] + r * p.dilation[0];
              if (ih < 0 || ih >= p.h) continue;
              for (int64_t s = 0; s < p.s; ++s) {
                const int64_t iw = ow * p.stride[1] - p.pad[1] + s * p.dilation[1];
                if (iw < 0 || iw >= p.w) continue;
                sum += widen(x[offset(p.x_stride, n, k / kg * cg + c, ih, iw)]) *
                       widen(w[offset(p.w_stride, k, c, tap(p, r, p.r), tap(p, s, p.s))]);
              }
            }
          blend(&y[offset(p.y_stride, n, k, oh, ow)], sum, scales);
        }
}

// dx[n, ci, ih, iw] = sum of dy[n, k, oh, ow] * w[k, c, r', s'] over the (k, r, s) whose window
// position oh*u - pad + r*dil lands on ih (and likewise for iw).
template <class T>
void backward_data(const Problem& p, const T* w, const T* dy, T* dx, const Scales& scales) {
  const int64_t cg = p.channels_per_group(), kg = p.k / p.groups;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t ci = 0; ci < p.c; ++ci)
      for (int64_t ih = 0; ih < p.h; ++ih)
        for (int64_t iw = 0; iw < p.w; ++iw) {
          const int64_t group = ci / cg, c = ci % cg;
          Accumulator<T> sum = 0;
          for (int64_t k = group * kg; k < (group + 1) * kg; ++k)
            for (int64_t r = 0; r < p.r; ++r) {
              const int64_t th = ih + p.pad[0] - r * p.dilation[0];
              if (th < 0 || th % p.stride[0] != 0 || th / p.stride[0] >= p.out_h) continue;
              for (int64_t s = 0; s < p.s; ++s) {
                const int64_t tw = iw + p.pad[1] - s * p.dilation[1];
                if (tw < 0 || tw % p.stride[1] != 0 || tw / p.stride[1] >= p.out_w) continue;
                sum += widen(dy[offset(p.y_stride, n, k, th / p.stride[0], tw / p.stride[1])]) *
                       widen(w[offset(p.w_stride, k, c, tap(p, r, p.r), tap(p, s, p.s))]);
              }
            }
          blend(&dx[offset(p.x_stride, n, ci, ih, iw)], sum, scales);
        }
}

// dw[k, c, r', s'] = sum over n, oh, ow of dy[n, k, oh, ow] * x[n, group(k) * C/g + c, oh*u - pad + r*dil, ...].
template <class T>
void backward_filter(const Problem& p, const T* x, const T* dy, T* dw, const Scales& scales) {
  const int64_t cg = p.channels_per_group(), kg = p.k / p.groups;
  for (int64_t k = 0; k < p.k; ++k)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t stored_r = 0; stored_r < p.r; ++stored_r)
        for (int64_t stored_s = 0; stored_s < p.s; ++stored_s) {
          const int64_t r = tap(p, stored_r, p.r), s = tap(p, stored_s, p.s);  // the flip is its own inverse
          Accumulator<T> sum = 0;
          for (int64_t n = 0; n < p.n; ++n)
            for (int64_t oh = 0; oh < p.out_h; ++oh) {
              const int64_t ih = oh * p.stride[0] - p.pad[0] + r * p.dilation[0];
              if (ih < 0 || ih >= p.h) continue;
              for (int64_t ow = 0; ow < p.out_w; ++ow) {
                const int64_t iw = ow * p.stride[1] - p.pad[1] + s * p.dilation[1];
                if (iw < 0 || iw >= p.w) continue;
                sum += widen(dy[offset(p.y_stride, n, k, oh, ow)]) *
                       widen(x[offset(p.x_stride, n, k / kg * cg + c, ih, iw)]);
              }
            }
          blend(&dw[offset(p.w_stride, k, c, stored_r, stored_s)], sum, scales);
        }
}

// Calls `body` with a value of the C++ type that holds `type`'s elements.
template <class Body>
void with_element_type(cudnnDataType_t type, Body&& body) {
  switch (type) {
    case CUDNN_DATA_FLOAT: body(float{}); break;
    case CUDNN_DATA_DOUBLE: body(double{}); break;
    case CUDNN_DATA_HALF: body(__half{}); break;
    default: body(__nv_bfloat16{}); break;
  }
}

// ---- the calls ----

// One call's arguments, in the forward pass's roles: for backward data x is dx (the output) and y is
// dy; for backward filter w is dw (the output) and y is dy.
struct Call {
  const char* name;
  Direction direction;
  cudnnHandle_t handle;
  const void* alpha;
  const void* beta;
  const cudnnTensorStruct* x_desc;
  const void* x;
  const cudnnFilterStruct* w_desc;
  const void* w;
  const cudnnConvolutionStruct* conv;
  int algo;
  void* workspace;
  size_t workspace_size;
  const cudnnTensorStruct* y_desc;
  const void* y;
};

double read_scale(const void* scale, cudnnDataType_t type) {
  return type == CUDNN_DATA_DOUBLE ? *static_cast<const double*>(scale) : double(*static_cast<const float*>(scale));
}

// The data pointers' names and checks: null is CUDNN_STATUS_BAD_PARAM_NULL_POINTER, an address that
// is no multiple of the element size CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER.
cudnnStatus_t check_pointers(const Call& call, const Problem& p) {
  const OperandNames names = operand_names(call.direction);
  const std::pair<const char*, const void*> operands[3] = {{names.x, call.x}, {names.w, call.w}, {names.y, call.y}};
  for (const auto& [desc, pointer] : operands) {
    const std::string operand(desc, std::strlen(desc) - 4);  // "dxDesc" -> "dx"
    if (!pointer) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call.name) + ": " + operand + " is NULL");
    if (reinterpret_cast<uintptr_t>(pointer) % element_size(p.type) != 0)
      return fail(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, std::string(call.name) + ": " + operand +
                                                                 " is not aligned to its " + type_name(p.type) +
                                                                 " elements");
  }
  return CUDNN_STATUS_SUCCESS;
}

// The queued computation: checks that every operand lies in memory of the handle's device (as the
// GPU would fault on it), clobbers the workspace, and computes.
std::function<std::string()> work(const Call& call, const Problem& p, size_t workspace_needed, Scales scales) {
  const int device = call.handle->device;
  const Direction direction = call.direction;
  const void *x = call.x, *w = call.w, *y = call.y;
  void* workspace = call.workspace;
  const OperandNames names = operand_names(direction);
  return [=]() -> std::string {
    for (const auto& [name, pointer, bytes] : {std::tuple{names.x, x, p.x_bytes}, std::tuple{names.w, w, p.w_bytes},
                                               std::tuple{names.y, y, p.y_bytes}})
      if (std::string e = check_device_range(std::string("the tensor of ") + name, pointer, bytes, device); !e.empty())
        return e;
    if (workspace_needed > 0) {
      if (std::string e = check_device_range("workSpace", workspace, workspace_needed, device); !e.empty()) return e;
      std::memset(workspace, 0xff, workspace_needed);  // NaN in every float type: undefined after the call
    }
    with_element_type(p.type, [&](auto zero) {
      using T = decltype(zero);
      switch (direction) {
        case Direction::forward:
          forward(p, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(const_cast<void*>(y)), scales);
          break;
        case Direction::backward_data:
          backward_data(p, static_cast<const T*>(w), static_cast<const T*>(y), static_cast<T*>(const_cast<void*>(x)),
                        scales);
          break;
        case Direction::backward_filter:
          backward_filter(p, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(const_cast<void*>(w)),
                          scales);
          break;
      }
    });
    return "";
  };
}

// Checks a call on the host (returning its status at once), then queues it on the handle's stream.
cudnnStatus_t convolve(const Call& call) {
  const std::string name = call.name;
  if (!call.handle) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, name + ": handle is NULL");
  if (!call.alpha || !call.beta) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, name + ": alpha or beta is NULL");
  Problem p;
  if (cudnnStatus_t s = make_problem(call.name, call.direction, call.x_desc, call.w_desc, call.conv, call.y_desc, &p);
      s != CUDNN_STATUS_SUCCESS)
    return s;
  if (cudnnStatus_t s = check_pointers(call, p); s != CUDNN_STATUS_SUCCESS) return s;
  const AlgorithmInfo* algo = algorithm_info(call.direction, call.algo);
  if (!algo) return fail(CUDNN_STATUS_BAD_PARAM, name + ": algo " + std::to_string(call.algo) + " is no enumerant");
  std::string why;
  if (cudnnStatus_t s = algorithm_support(call.direction, call.algo, p, &why); s != CUDNN_STATUS_SUCCESS)
    return fail(s, name + ": " + why + ": " + p.text);
  const size_t needed = workspace_bytes(call.direction, call.algo, p);
  if (call.workspace_size < needed)
    return fail(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
                name + ": algorithm " + algo->name + " needs " + std::to_string(needed) +
                    " bytes of workspace, workSpaceSizeInBytes is " + std::to_string(call.workspace_size) + ": " + p.text);
  if (needed > 0 && !call.workspace)
    return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                name + ": algorithm " + algo->name + " needs a workspace, workSpace is NULL");
  // alpha and beta are read now: the caller may reuse them as soon as the call returns.
  const Scales scales{read_scale(call.alpha, p.type), read_scale(call.beta, p.type)};
  const bool out_x = call.direction == Direction::backward_data, out_w = call.direction == Direction::backward_filter;
  std::vector<Access> accesses = {{call.x, out_x}, {call.w, out_w}, {call.y, !out_x && !out_w}};
  if (needed > 0) accesses.push_back({call.workspace, true});
  enqueue(call.handle->stream, name + " (algo " + algo->name + ", " + p.text + ")", std::move(accesses),
          work(call, p, needed, scales));
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace brigade::emu::dnn

namespace dnn = brigade::emu::dnn;
using dnn::Direction;

// API reference, cudnn_cnn library, "cudnnConvolutionForward()": y = alpha * conv(x, w) + beta * y.
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void* x, const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  return dnn::convolve({"cudnnConvolutionForward", Direction::forward, handle, alpha, beta, xDesc, x, wDesc, w,
                        convDesc, int(algo), workSpace, workSpaceSizeInBytes, yDesc, y});
}

// API reference, cudnn_cnn library, "cudnnConvolutionBackwardData()": dx = alpha * (the gradient of
// the forward pass's output with respect to its input, given dy) + beta * dx.
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  return dnn::convolve({"cudnnConvolutionBackwardData", Direction::backward_data, handle, alpha, beta, dxDesc, dx,
                        wDesc, w, convDesc, int(algo), workSpace, workSpaceSizeInBytes, dyDesc, dy});
}

// API reference, cudnn_cnn library, "cudnnConvolutionBackwardFilter()": dw = alpha * (the gradient
// with respect to the filter, given x and dy) + beta * dw.
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace,
                                             size_t workSpaceSizeInBytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  return dnn::convolve({"cudnnConvolutionBackwardFilter", Direction::backward_filter, handle, alpha, beta, xDesc, x,
                        dwDesc, dw, convDesc, int(algo), workSpace, workSpaceSizeInBytes, dyDesc, dy});
}
