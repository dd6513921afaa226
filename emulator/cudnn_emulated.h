// What the emulated cuDNN's files share (emulator/cudnn_*.cpp): the contents of cuDNN's
// opaque handle and descriptors, the checked description of one convolution (a Problem), the
// emulated algorithms, and the thread's last error text.
//
// The declarations of every entry point come from NVIDIA's own cudnn.h, so each signature is checked
// against the real one; only the structs behind the opaque pointers are defined here.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>

// The opaque types cudnn.h declares. A descriptor remembers whether it was ever set, because cuDNN
// rejects a created-but-unset descriptor (CUDNN_STATUS_BAD_PARAM) instead of reading garbage.
struct cudnnContext {
  int device = 0;                  // the current device when cudnnCreate ran
  cudaStream_t stream = nullptr;   // cudnnSetStream's; nullptr is the legacy default stream
};

struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int64_t size[4] = {};    // n, c, h, w
  int64_t stride[4] = {};  // in elements, same order
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;  // NCHW: [k][c][h][w]; NHWC: [k][h][w][c]
  int64_t size[4] = {};                             // k, c, h, w
};

struct cudnnConvolutionStruct {
  bool set = false;
  int pad[2] = {}, stride[2] = {1, 1}, dilation[2] = {1, 1};  // h, w
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  int groups = 1;
};

namespace brigade::emu::dnn {

// Records `message` as the thread's last error (cudnnGetLastErrorString) and returns `status`
// (cudnn_handle.cpp). The helpers below it are in cudnn_descriptors.cpp.
cudnnStatus_t fail(cudnnStatus_t status, const std::string& message);

size_t element_size(cudnnDataType_t type);  // 0 for types the emulation does not know
const char* type_name(cudnnDataType_t type);

// "[2,3,5,5] strides [75,25,5,1] FLOAT": what error texts say about a tensor.
std::string describe(const cudnnTensorStruct& t);
std::string describe(const cudnnFilterStruct& f);

// How a tensor's elements lie in memory. nchw / nhwc: the strides never make two elements share an
// address, walking the dims in that order (padding between rows, channels or images is allowed);
// other: anything else (overlapping or broadcast strides, CHWN, ...).
enum class Layout { nchw, nhwc, other };
Layout layout_of(const cudnnTensorStruct& t);
const char* layout_name(Layout layout);

// Bytes from element 0 to one past the last element a tensor or filter covers.
size_t span_bytes(const cudnnTensorStruct& t);
size_t span_bytes(const cudnnFilterStruct& f);

// The three computations of the convolution API.
enum class Direction { forward, backward_data, backward_filter };

// One convolution, checked for consistency: sizes, strides (in elements) of the three operands in
// (n, c, h, w) / (k, c, r, s) order, and the convolution's geometry.
struct Problem {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;  // of x, w and y alike
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t n = 0, c = 0, h = 0, w = 0;       // input
  int64_t k = 0, r = 0, s = 0;              // filter: output channels, height, width (c / groups inputs)
  int64_t out_h = 0, out_w = 0;
  int64_t groups = 1;
  int64_t pad[2] = {}, stride[2] = {}, dilation[2] = {};
  int64_t x_stride[4] = {}, w_stride[4] = {}, y_stride[4] = {};
  Layout x_layout = Layout::nchw, y_layout = Layout::nchw;
  cudnnTensorFormat_t filter_format = CUDNN_TENSOR_NCHW;
  size_t x_bytes = 0, w_bytes = 0, y_bytes = 0;
  std::string text;  // "x [..], w [..], y [..], pad (1,1) stride (2,2) dilation (1,1) CROSS_CORRELATION"

  int64_t channels_per_group() const { return c / groups; }
  int64_t multiply_adds() const { return n * k * channels_per_group() * r * s * out_h * out_w; }
};

// The names a call gives its operands, for error texts: {"xDesc", "wDesc", "yDesc"} for the forward
// pass, {"dxDesc", "wDesc", "dyDesc"} for backward data, {"xDesc", "dwDesc", "dyDesc"} for backward
// filter.
struct OperandNames {
  const char* x;
  const char* w;
  const char* y;
};
OperandNames operand_names(Direction direction);

// Checks the descriptors of one call against each other (cudnn_problem.cpp): a null descriptor is
// CUDNN_STATUS_BAD_PARAM_NULL_POINTER; an unset one, mismatched data types or channel counts, or an
// output whose size is not what the convolution gives, CUDNN_STATUS_BAD_PARAM.
cudnnStatus_t make_problem(const char* call, Direction direction, const cudnnTensorStruct* x,
                           const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                           const cudnnTensorStruct* y, Problem* problem);

// ---- the emulated algorithms (cudnn_algorithms.cpp) ----

struct AlgorithmInfo {
  int id;
  const char* name;
  bool deterministic;
};

int algorithm_count(Direction direction);  // the header's *_ALGO_COUNT
// Info for `algo`; nullptr when `algo` is not one of the direction's enumerants.
const AlgorithmInfo* algorithm_info(Direction direction, int algo);
// CUDNN_STATUS_SUCCESS when the emulation runs `algo` on `problem`, else the NOT_SUPPORTED status to
// report, with the reason in *why.
cudnnStatus_t algorithm_support(Direction direction, int algo, const Problem& problem, std::string* why);
size_t workspace_bytes(Direction direction, int algo, const Problem& problem);

}  // namespace brigade::emu::dnn
