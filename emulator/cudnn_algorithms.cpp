// The emulated cuDNN's convolution algorithms: which ones it runs, on which configurations, with what
// workspace and determinism, and the _v7 heuristics that rank them.
//
// Every algorithm enumerant of cudnn_ops.h is known here, with the determinism the cuDNN API
// reference states for it ("cudnnConvolutionFwdAlgo_t", "cudnnConvolutionBwdDataAlgo_t",
// "cudnnConvolutionBwdFilterAlgo_t": BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0 and BWD_FILTER_ALGO_3 sum
// with atomic adds and are non-deterministic; the others are deterministic). The emulation runs
// the ones below, which all compute the same sums in a fixed order (cudnn_conv.cpp); their supported
// tensor layouts follow the "Supported configurations" tables of cudnnConvolutionForward,
// cudnnConvolutionBackwardData and cudnnConvolutionBackwardFilter (2-D, NCHW filter):
//
//   forward        IMPLICIT_GEMM          x, y NCHW or NHWC    no workspace
//                  IMPLICIT_PRECOMP_GEMM  x, y NCHW or NHWC    4 bytes per filter tap (index table)
//                  GEMM                   x, y NCHW            an im2col matrix of one image
//   backward data  ALGO_0 (atomics)       dx, dy NCHW or NHWC  no workspace
//                  ALGO_1                 dx, dy NCHW          no workspace
//   backward filt. ALGO_0 (atomics)       x, dy NCHW or NHWC   no workspace
//                  ALGO_1                 x, dy NCHW           an im2col matrix of one image
//                  ALGO_3 (atomics)       x, dy NCHW, dilation 1; 4 bytes per filter tap
//
// With an NHWC (KRSC) filter the tables ask for NHWC tensors throughout; GEMM does not take one.
// Consequently a backward pass over NHWC-strided tensors with an NCHW filter has only ALGO_0, which is
// non-deterministic: callers that insist on determinism (kernels/cuda/conv_cudnn.cpp) must fall back.
//
// Not emulated (status CUDNN_STATUS_NOT_SUPPORTED in every ranking): FFT, FFT_TILING, WINOGRAD and
// WINOGRAD_NONFUSED, whose results differ from a direct sum by their transforms' rounding, which the
// emulation does not reproduce; FWD_ALGO_DIRECT and BWD_FILTER_ALGO_WINOGRAD, for which cuDNN has no
// kernel at all. Data type configurations: FLOAT_CONFIG, DOUBLE_CONFIG, PSEUDO_HALF_CONFIG and
// PSEUDO_BFLOAT16_CONFIG (16-bit data, f32 compute); TRUE_HALF_CONFIG and the rest are
// CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE. Times in the rankings come from a cost model (below), not
// from measurement: the emulation has no GPU to time.
#include <algorithm>
#include <string>
#include <vector>

#include "emulator/cudnn_emulated.h"

namespace brigade::emu::dnn {
namespace {

struct Algorithm {
  AlgorithmInfo info;
  bool emulated;
  float cost;  // modeled time per multiply-add, relative; ranks the emulated algorithms
};

// Costs: the implicit GEMMs with precomputed indices beat the explicit im2col GEMM, which beats the
// plain implicit GEMM; the atomic-add backward algorithms are the fastest of their direction, as
// cuDNN's heuristics commonly rank them, so a caller that wants determinism must skip them.
const std::vector<Algorithm>& table(Direction direction) {
  static const std::vector<Algorithm> forward = {
      {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM", true}, true, 1.5f},
      {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "IMPLICIT_PRECOMP_GEMM", true}, true, 1.0f},
      {{CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "GEMM", true}, true, 1.25f},
      {{CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "DIRECT", true}, false, 0},
      {{CUDNN_CONVOLUTION_FWD_ALGO_FFT, "FFT", true}, false, 0},
      {{CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "FFT_TILING", true}, false, 0},
      {{CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "WINOGRAD", true}, false, 0},
      {{CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED", true}, false, 0},
  };
  static const std::vector<Algorithm> backward_data = {
      {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "ALGO_0", false}, true, 1.0f},
      {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "ALGO_1", true}, true, 1.2f},
      {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, "FFT", true}, false, 0},
      {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, "FFT_TILING", true}, false, 0},
      {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, "WINOGRAD", true}, false, 0},
      {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED", true}, false, 0},
  };
  static const std::vector<Algorithm> backward_filter = {
      {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "ALGO_0", false}, true, 1.0f},
      {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "ALGO_1", true}, true, 1.4f},
      {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, "FFT", true}, false, 0},
      {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, "ALGO_3", false}, true, 1.1f},
      {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, "WINOGRAD", true}, false, 0},
      {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED", true}, false, 0},
      {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, "FFT_TILING", true}, false, 0},
  };
  switch (direction) {
    case Direction::forward: return forward;
    case Direction::backward_data: return backward_data;
    default: return backward_filter;
  }
}

const Algorithm* find(Direction direction, int algo) {
  for (const Algorithm& a : table(direction))
    if (a.info.id == algo) return &a;
  return nullptr;
}

// The four data type configurations the emulation runs: data and compute type pairs.
bool supported_configuration(const Problem& p) {
  switch (p.type) {
    case CUDNN_DATA_FLOAT: return p.compute == CUDNN_DATA_FLOAT;
    case CUDNN_DATA_DOUBLE: return p.compute == CUDNN_DATA_DOUBLE;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return p.compute == CUDNN_DATA_FLOAT;
    default: return false;
  }
}

// Which tensor layouts an emulated algorithm takes (the table at the top), as "" or the reason not.
std::string layout_problem(Direction direction, int algo, const Problem& p) {
  if (p.x_layout == Layout::other || p.y_layout == Layout::other)
    return "its tensors' strides are neither NCHW nor NHWC";
  const bool both_nchw = p.x_layout == Layout::nchw && p.y_layout == Layout::nchw;
  const bool both_nhwc = p.x_layout == Layout::nhwc && p.y_layout == Layout::nhwc;
  const bool gemm = direction == Direction::forward && algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
  if (p.filter_format == CUDNN_TENSOR_NHWC) {
    if (gemm) return "it takes no NHWC filter";
    return both_nhwc ? "" : "with an NHWC filter it needs NHWC tensors";
  }
  const bool any_layout = (direction == Direction::forward && !gemm) ||
                          (direction == Direction::backward_data && algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0) ||
                          (direction == Direction::backward_filter && algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
  if (any_layout || both_nchw) return "";
  return "it needs NCHW tensors";
}

// What the perf results report as the math type: the descriptor's, except that 16-bit data under
// CUDNN_DEFAULT_MATH runs on tensor cores (the default permits them; only CUDNN_FMA_MATH forbids).
cudnnMathType_t reported_math(const Problem& p) {
  const bool half = p.type == CUDNN_DATA_HALF || p.type == CUDNN_DATA_BFLOAT16;
  return half && p.math == CUDNN_DEFAULT_MATH ? CUDNN_TENSOR_OP_MATH : p.math;
}

}  // namespace

int algorithm_count(Direction direction) { return int(table(direction).size()); }

const AlgorithmInfo* algorithm_info(Direction direction, int algo) {
  const Algorithm* a = find(direction, algo);
  return a ? &a->info : nullptr;
}

cudnnStatus_t algorithm_support(Direction direction, int algo, const Problem& p, std::string* why) {
  const Algorithm* a = find(direction, algo);
  const std::string name = a ? a->info.name : std::to_string(algo);
  if (!supported_configuration(p)) {
    *why = std::string(type_name(p.type)) + " data with " + type_name(p.compute) +
           " compute is not a data type configuration the emulation runs (FLOAT, DOUBLE, PSEUDO_HALF, "
           "PSEUDO_BFLOAT16)";
    return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  }
  if (!a || !a->emulated) {
    *why = "algorithm " + name + " is not emulated";
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  if (const std::string layout = layout_problem(direction, algo, p); !layout.empty()) {
    *why = "algorithm " + name + ": " + layout + " (x " + layout_name(p.x_layout) + ", y " + layout_name(p.y_layout) + ")";
    return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  }
  const bool dilated = p.dilation[0] != 1 || p.dilation[1] != 1;
  if (direction == Direction::backward_filter && algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 && dilated) {
    *why = "algorithm ALGO_3 needs dilation 1";
    return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
  }
  return CUDNN_STATUS_SUCCESS;
}

size_t workspace_bytes(Direction direction, int algo, const Problem& p) {
  const size_t taps = size_t(p.channels_per_group() * p.r * p.s);
  const size_t im2col = taps * size_t(p.out_h * p.out_w) * element_size(p.type);
  const size_t index_table = taps * sizeof(int32_t);
  switch (direction) {
    case Direction::forward:
      if (algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return index_table;
      if (algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM) return im2col;
      return 0;
    case Direction::backward_filter:
      if (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1) return im2col;
      if (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3) return index_table;
      return 0;
    default: return 0;
  }
}

namespace {

// The _v7 heuristics, for any direction: every algorithm, those that run first (cheapest modeled
// time first), then the unsupported ones in enumerant order with their status, time -1 and no
// memory. cudnnGet*Algorithm_v7 in the API reference: CUDNN_STATUS_BAD_PARAM for a
// requestedAlgoCount below 1 and for inconsistent descriptors.
template <class Perf, class Algo>
cudnnStatus_t heuristics(const char* call, Direction direction, cudnnHandle_t handle, const cudnnTensorStruct* x,
                         const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                         int requested, int* returned, Perf* results) {
  if (!handle || !returned || !results)
    return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                std::string(call) + ": handle, returnedAlgoCount or perfResults is NULL");
  if (requested < 1)
    return fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": requestedAlgoCount " + std::to_string(requested) +
                                            " is below 1");
  Problem p;
  if (const cudnnStatus_t s = make_problem(call, direction, x, w, conv, y, &p); s != CUDNN_STATUS_SUCCESS) return s;
  std::vector<Perf> perfs;
  for (const Algorithm& a : table(direction)) {
    Perf perf{};
    std::string why;
    perf.algo = Algo(a.info.id);
    perf.status = algorithm_support(direction, a.info.id, p, &why);
    const bool runs = perf.status == CUDNN_STATUS_SUCCESS;
    perf.time = runs ? float(double(p.multiply_adds()) * a.cost * 1e-9) : -1.0f;  // at 1 multiply-add / ps
    perf.memory = runs ? workspace_bytes(direction, a.info.id, p) : 0;
    perf.determinism = a.info.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    perf.mathType = reported_math(p);
    perfs.push_back(perf);
  }
  std::stable_sort(perfs.begin(), perfs.end(), [](const Perf& a, const Perf& b) {
    const bool a_runs = a.status == CUDNN_STATUS_SUCCESS, b_runs = b.status == CUDNN_STATUS_SUCCESS;
    if (a_runs != b_runs) return a_runs;
    return a_runs && a.time < b.time;
  });
  *returned = std::min(requested, int(perfs.size()));
  std::copy_n(perfs.begin(), *returned, results);
  return CUDNN_STATUS_SUCCESS;
}

// cudnnGetConvolution*WorkspaceSize in the API reference: the bytes `algo` needs;
// CUDNN_STATUS_BAD_PARAM for an algo that is no enumerant, the algorithm's NOT_SUPPORTED status
// where it does not take the configuration.
cudnnStatus_t workspace_size(const char* call, Direction direction, cudnnHandle_t handle, const cudnnTensorStruct* x,
                             const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                             const cudnnTensorStruct* y, int algo, size_t* bytes) {
  if (!handle || !bytes)
    return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": handle or sizeInBytes is NULL");
  Problem p;
  if (const cudnnStatus_t s = make_problem(call, direction, x, w, conv, y, &p); s != CUDNN_STATUS_SUCCESS) return s;
  if (!algorithm_info(direction, algo))
    return fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": algo " + std::to_string(algo) + " is no enumerant");
  std::string why;
  if (const cudnnStatus_t s = algorithm_support(direction, algo, p, &why); s != CUDNN_STATUS_SUCCESS)
    return fail(s, std::string(call) + ": " + why + ": " + p.text);
  *bytes = workspace_bytes(direction, algo, p);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t max_count(cudnnHandle_t handle, int* count, Direction direction, const char* call) {
  if (!handle || !count) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": handle or count is NULL");
  *count = algorithm_count(direction);
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace brigade::emu::dnn

namespace dnn = brigade::emu::dnn;
using dnn::Direction;

// API reference, cudnn_cnn library, "cudnnGetConvolutionForwardAlgorithmMaxCount()" and its backward
// counterparts: how many perf results the _v7 heuristics can return (every enumerant).
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return dnn::max_count(handle, count, Direction::forward, "cudnnGetConvolutionForwardAlgorithmMaxCount");
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return dnn::max_count(handle, count, Direction::backward_data, "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return dnn::max_count(handle, count, Direction::backward_filter,
                        "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
}

// API reference, cudnn_cnn library, "cudnnGetConvolutionForwardAlgorithm_v7()".
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
                                                     const cudnnFilterDescriptor_t filterDesc,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t destDesc,
                                                     const int requestedAlgoCount, int* returnedAlgoCount,
                                                     cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return dnn::heuristics<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnGetConvolutionForwardAlgorithm_v7", Direction::forward, handle, srcDesc, filterDesc, convDesc, destDesc,
      requestedAlgoCount, returnedAlgoCount, perfResults);
}

// API reference, cudnn_cnn library, "cudnnGetConvolutionBackwardDataAlgorithm_v7()".
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle,
                                                          const cudnnFilterDescriptor_t filterDesc,
                                                          const cudnnTensorDescriptor_t diffDesc,
                                                          const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t gradDesc,
                                                          const int requestedAlgoCount, int* returnedAlgoCount,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return dnn::heuristics<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnGetConvolutionBackwardDataAlgorithm_v7", Direction::backward_data, handle, gradDesc, filterDesc, convDesc,
      diffDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

// API reference, cudnn_cnn library, "cudnnGetConvolutionBackwardFilterAlgorithm_v7()".
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle,
                                                            const cudnnTensorDescriptor_t srcDesc,
                                                            const cudnnTensorDescriptor_t diffDesc,
                                                            const cudnnConvolutionDescriptor_t convDesc,
                                                            const cudnnFilterDescriptor_t gradDesc,
                                                            const int requestedAlgoCount, int* returnedAlgoCount,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return dnn::heuristics<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", Direction::backward_filter, handle, srcDesc, gradDesc, convDesc,
      diffDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

// API reference, cudnn_cnn library, "cudnnGetConvolutionForwardWorkspaceSize()".
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return dnn::workspace_size("cudnnGetConvolutionForwardWorkspaceSize", Direction::forward, handle, xDesc, wDesc,
                             convDesc, yDesc, int(algo), sizeInBytes);
}

// API reference, cudnn_cnn library, "cudnnGetConvolutionBackwardDataWorkspaceSize()".
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  return dnn::workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", Direction::backward_data, handle, dxDesc,
                             wDesc, convDesc, dyDesc, int(algo), sizeInBytes);
}

// API reference, cudnn_cnn library, "cudnnGetConvolutionBackwardFilterWorkspaceSize()".
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                             const cudnnTensorDescriptor_t dyDesc,
                                                             const cudnnConvolutionDescriptor_t convDesc,
                                                             const cudnnFilterDescriptor_t gradDesc,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t* sizeInBytes) {
  return dnn::workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", Direction::backward_filter, handle,
                             xDesc, gradDesc, convDesc, dyDesc, int(algo), sizeInBytes);
}
