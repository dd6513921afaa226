// Convolutions through cuDNN's convolution API: descriptors, algorithm choice, workspaces.
//
// cuDNN needs, per call, descriptors of the three tensors and of the convolution, an algorithm and a
// workspace of the size that algorithm asks for. Building descriptors and asking cuDNN's heuristics
// (cudnnGet*Algorithm_v7) costs far more than a small convolution, so it is done once per shape: a
// Plan holds everything for one (device, dtype, shapes, stride, padding), in a process-wide cache.
//
// Algorithm choice: the heuristics' ranking, first entry that is
//   - deterministic (training runs are reproducible; cuDNN offers such an algorithm for almost
//     every shape — when it doesn't, the direct kernels run instead),
//   - exact for f32: no TF32 tensor cores unless ops::allow_tf32(),
//   - content with a workspace of at most kMaxWorkspace.
// Workspaces come from the caching allocator as tensors allocated on the current stream, freed once
// the call is enqueued (stream order keeps the next user of the block behind this call).
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/conv_direct.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/ops.h"

namespace brigade::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t(512) << 20;

struct ThreadHandles {
  std::vector<cudnnHandle_t> by_device;
  ~ThreadHandles() {
    for (cudnnHandle_t h : by_device)
      if (h) cudnnDestroy(h);  // at thread exit; nothing to report to
  }
};

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f16: return CUDNN_DATA_HALF;
    default: fail("conv2d (cudnn): no cuDNN type for ", dtype_name(t));
  }
}

// What a Plan is cached by.
struct PlanKey {
  int device;
  DType dtype;
  bool tf32;
  std::array<int64_t, 4> x, w;
  int64_t stride, padding;
  auto operator<=>(const PlanKey&) const = default;
};

// One direction's choice: the algorithm, how to run it, and its workspace.
template <class Algo>
struct Choice {
  bool available = false;  // false: no acceptable cuDNN algorithm, use the direct kernel
  Algo algo{};
  cudnnConvolutionDescriptor_t conv = nullptr;  // one per direction: the math type may differ
  size_t workspace = 0;
};

// Everything cuDNN needs for one convolution shape. Built once, then only read (by any thread).
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  Choice<cudnnConvolutionFwdAlgo_t> forward;
  Choice<cudnnConvolutionBwdDataAlgo_t> backward_data;
  Choice<cudnnConvolutionBwdFilterAlgo_t> backward_filter;
};

bool uses_tensor_cores(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The first acceptable entry of a heuristics ranking (see the top of the file), or null.
template <class Perf>
const Perf* first_acceptable(const Perf* perfs, int count, DType dtype, bool tf32) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = perfs[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC || p.memory > kMaxWorkspace)
      continue;
    if (dtype == DType::f32 && !tf32 && uses_tensor_cores(p.mathType)) continue;
    return &p;
  }
  return nullptr;
}

// A convolution descriptor for `key`, with the math type cuDNN's search should start from: plain
// FMAs for exact f32, tensor cores for 16-bit types.
cudnnConvolutionDescriptor_t make_conv(const PlanKey& key) {
  cudnnConvolutionDescriptor_t conv;
  BRIGADE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
  const cudnnDataType_t compute = key.dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const int pad = int(key.padding), stride = int(key.stride);
  BRIGADE_CUDNN_CHECK(
      cudnnSetConvolution2dDescriptor(conv, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION, compute));
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  if (key.dtype == DType::f32 && !key.tf32) math = CUDNN_FMA_MATH;
  if (key.dtype == DType::bf16 || key.dtype == DType::f16) math = CUDNN_TENSOR_OP_MATH;
  BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
  return conv;
}

// Asks the heuristics for one direction (`find` wraps cudnnGet*Algorithm_v7, `size` the matching
// workspace query) and records the choice.
template <class Algo, class Perf, class Find, class Size>
Choice<Algo> choose(const PlanKey& key, Find&& find, Size&& size) {
  Choice<Algo> choice;
  choice.conv = make_conv(key);
  constexpr int kMaxAlgos = 16;
  Perf perfs[kMaxAlgos];
  int count = 0;
  BRIGADE_CUDNN_CHECK(find(choice.conv, kMaxAlgos, &count, perfs));
  const Perf* best = first_acceptable(perfs, count, key.dtype, key.tf32);
  if (!best) return choice;
  choice.available = true;
  choice.algo = best->algo;
  BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(choice.conv, best->mathType));
  BRIGADE_CUDNN_CHECK(size(choice.conv, best->algo, &choice.workspace));
  return choice;
}

Plan make_plan(const PlanKey& key, const Shape& y_shape, cudnnHandle_t handle) {
  auto i = [](int64_t v) { return int(v); };  // the op layer and plan_for checked that sizes fit
  const cudnnDataType_t type = cudnn_type(key.dtype);
  Plan plan;
  BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.x));
  BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.y));
  BRIGADE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan.w));
  BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NCHW, type, i(key.x[0]), i(key.x[1]),
                                                 i(key.x[2]), i(key.x[3])));
  BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NCHW, type, i(y_shape[0]), i(y_shape[1]),
                                                 i(y_shape[2]), i(y_shape[3])));
  BRIGADE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w, type, CUDNN_TENSOR_NCHW, i(key.w[0]), i(key.w[1]),
                                                 i(key.w[2]), i(key.w[3])));

  plan.forward = choose<cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t>(
      key,
      [&](cudnnConvolutionDescriptor_t conv, int n, int* count, cudnnConvolutionFwdAlgoPerf_t* perfs) {
        return cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x, plan.w, conv, plan.y, n, count, perfs);
      },
      [&](cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x, plan.w, conv, plan.y, algo, bytes);
      });
  plan.backward_data = choose<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>(
      key,
      [&](cudnnConvolutionDescriptor_t conv, int n, int* count, cudnnConvolutionBwdDataAlgoPerf_t* perfs) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan.w, plan.y, conv, plan.x, n, count, perfs);
      },
      [&](cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan.w, plan.y, conv, plan.x, algo, bytes);
      });
  plan.backward_filter = choose<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t>(
      key,
      [&](cudnnConvolutionDescriptor_t conv, int n, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* perfs) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan.x, plan.y, conv, plan.w, n, count, perfs);
      },
      [&](cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan.x, plan.y, conv, plan.w, algo, bytes);
      });
  return plan;
}

// The cached plan for this convolution, built on first use. Plans live as long as the process (the
// cache is deliberately never destroyed: tearing cuDNN objects down during static destruction races
// the CUDA runtime's own shutdown).
const Plan& plan_for(const char* op, const Shape& x, const Shape& w, const Shape& y, ops::Conv2dParams p,
                     DType dtype, Device device, cudnnHandle_t handle) {
  for (const Shape* s : {&x, &w, &y})
    for (int64_t size : *s)
      BRIGADE_CHECK(size <= INT_MAX, op, ": input ", shape_str(x), " and weight ", shape_str(w),
                    " have a dim too large for cuDNN");
  const PlanKey key{device.index, dtype, ops::allow_tf32(), {x[0], x[1], x[2], x[3]}, {w[0], w[1], w[2], w[3]},
                    p.stride, p.padding};
  static std::mutex mutex;
  static auto* cache = new std::map<PlanKey, Plan>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache->find(key);
  if (it == cache->end()) it = cache->emplace(key, make_plan(key, y, handle)).first;
  return it->second;
}

// A workspace of `bytes` from the caching allocator (undefined when none is needed).
Tensor workspace(size_t bytes, Device device) {
  return bytes == 0 ? Tensor() : empty({int64_t((bytes + 3) / 4)}, DType::f32, device);
}
void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// An operand cuDNN can read with vector loads. A contiguous view at an offset (a micro-batch sliced
// from a batch, say) is aligned only to its element size, and some cuDNN kernels — the 16-bit ones
// especially — assume 16-byte-aligned pointers. Such a view is copied into a fresh buffer (the
// caching allocator aligns blocks to far more than 16 bytes); aligned ones pass as they are.
Tensor aligned(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0) return t;
  return ops::clone(t);
}

// cuDNN's alpha and beta: double for f64 data, float otherwise.
struct Scale {
  double d;
  float f;
  const void* for_type(DType t) const { return t == DType::f64 ? static_cast<const void*>(&d) : &f; }
};
constexpr Scale kOne{1, 1}, kZero{0, 0};

std::atomic<int64_t> fallbacks{0};
void fall_back() { fallbacks.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

int64_t cudnn_conv_fallbacks() { return fallbacks.load(std::memory_order_relaxed); }

cudnnHandle_t cudnn_handle(Device device, cudaStream_t stream) {
  thread_local ThreadHandles handles;
  const size_t index = size_t(device.index);
  if (handles.by_device.size() <= index) handles.by_device.resize(index + 1, nullptr);
  cudnnHandle_t& handle = handles.by_device[index];
  if (!handle) BRIGADE_CUDNN_CHECK(cudnnCreate(&handle));
  BRIGADE_CUDNN_CHECK(cudnnSetStream(handle, stream));
  return handle;
}

void conv2d_cudnn(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, ops::Conv2dParams p) {
  cudaStream_t stream = stream_for(y);
  cudnnHandle_t handle = cudnn_handle(y.device(), stream);
  const Plan& plan = plan_for("conv2d", x.shape(), weight.shape(), y.shape(), p, y.dtype(), y.device(), handle);
  if (!plan.forward.available) {  // no acceptable cuDNN algorithm
    fall_back();
    return conv2d_direct(y, x, weight, bias, p);
  }
  // y = bias, then y = conv(x, w) + 1 * y: cuDNN adds the bias in f32, so 16-bit outputs round once.
  if (bias.defined()) fill_channel_bias(y, bias);
  const Tensor ws = workspace(plan.forward.workspace, y.device());
  const Tensor xa = aligned(x), wa = aligned(weight);
  BRIGADE_CUDNN_CHECK(cudnnConvolutionForward(handle, kOne.for_type(y.dtype()), plan.x, xa.raw_data(), plan.w,
                                              wa.raw_data(), plan.forward.conv, plan.forward.algo,
                                              data_or_null(ws), plan.forward.workspace,
                                              (bias.defined() ? kOne : kZero).for_type(y.dtype()), plan.y,
                                              y.raw_data()));
}

void conv2d_backward_input_cudnn(const Tensor& grad_x, const Tensor& grad_y, const Tensor& weight,
                                 ops::Conv2dParams p) {
  cudaStream_t stream = stream_for(grad_x);
  cudnnHandle_t handle = cudnn_handle(grad_x.device(), stream);
  const Plan& plan = plan_for("conv2d_backward_input", grad_x.shape(), weight.shape(), grad_y.shape(), p,
                              grad_x.dtype(), grad_x.device(), handle);
  if (!plan.backward_data.available) {  // no acceptable cuDNN algorithm
    fall_back();
    return conv2d_backward_input_direct(grad_x, grad_y, weight, p);
  }
  const Tensor ws = workspace(plan.backward_data.workspace, grad_x.device());
  const Tensor wa = aligned(weight), gya = aligned(grad_y);
  BRIGADE_CUDNN_CHECK(cudnnConvolutionBackwardData(
      handle, kOne.for_type(grad_x.dtype()), plan.w, wa.raw_data(), plan.y, gya.raw_data(),
      plan.backward_data.conv, plan.backward_data.algo, data_or_null(ws), plan.backward_data.workspace,
      kZero.for_type(grad_x.dtype()), plan.x, grad_x.raw_data()));
}

void conv2d_backward_weight_cudnn(const Tensor& grad_weight, const Tensor& grad_y, const Tensor& x,
                                  ops::Conv2dParams p) {
  cudaStream_t stream = stream_for(grad_weight);
  cudnnHandle_t handle = cudnn_handle(grad_weight.device(), stream);
  const Plan& plan = plan_for("conv2d_backward_weight", x.shape(), grad_weight.shape(), grad_y.shape(), p,
                              grad_weight.dtype(), grad_weight.device(), handle);
  if (!plan.backward_filter.available) {  // no acceptable cuDNN algorithm
    fall_back();
    return conv2d_backward_weight_direct(grad_weight, grad_y, x, p);
  }
  const Tensor ws = workspace(plan.backward_filter.workspace, grad_weight.device());
  const Tensor xa = aligned(x), gya = aligned(grad_y);
  BRIGADE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      handle, kOne.for_type(grad_weight.dtype()), plan.x, xa.raw_data(), plan.y, gya.raw_data(),
      plan.backward_filter.conv, plan.backward_filter.algo, data_or_null(ws), plan.backward_filter.workspace,
      kZero.for_type(grad_weight.dtype()), plan.w, grad_weight.raw_data()));
}

}  // namespace brigade::cuda
