// The emulated cuDNN's descriptors: 4-D tensors, 4-D filters and 2-D convolutions, and what the
// other cudnn_*.cpp files ask of them (element sizes, layouts, byte spans, texts).
//
// Models (cuDNN API reference, cudnn_ops and cudnn_cnn libraries): cudnnCreate/Destroy/Set/Get of
// tensor descriptors (4-D, with NCHW or NHWC packing or explicit strides), filter descriptors (4-D,
// NCHW = KCRS or NHWC = KRSC) and convolution descriptors (padding, stride, dilation, mode, compute
// type, math type, group count). Does not model: N-d descriptors, NCHW_VECT_C, integer and 8-bit
// float types, reorder types, and the 2^31-element limit of real tensors.
#include <cstdint>
#include <string>

#include "emulator/cudnn_emulated.h"

namespace brigade::emu::dnn {

size_t element_size(cudnnDataType_t type) {
  switch (type) {
    case CUDNN_DATA_FLOAT: return 4;
    case CUDNN_DATA_DOUBLE: return 8;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    default: return 0;
  }
}

const char* type_name(cudnnDataType_t type) {
  switch (type) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_DOUBLE: return "DOUBLE";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    default: return "an unemulated data type";
  }
}

namespace {

std::string list(const int64_t* v) {
  return "[" + std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]) + "," +
         std::to_string(v[3]) + "]";
}

// Whether walking dims `order` (outermost first) never revisits an address: each dim's stride is at
// least the extent of the dims inside it. Dims of size 1 have no extent and any stride.
bool non_overlapping(const int64_t* size, const int64_t* stride, const int (&order)[4]) {
  int64_t inner_extent = 1;
  for (int i = 3; i >= 0; --i) {
    const int d = order[i];
    if (size[d] == 1) continue;
    if (stride[d] < inner_extent) return false;
    inner_extent = stride[d] * size[d];
  }
  return true;
}

// Strides of a packed NCHW or NHWC tensor of `size` (n, c, h, w).
void packed_strides(cudnnTensorFormat_t format, const int64_t* size, int64_t* stride) {
  const int64_t c = size[1], h = size[2], w = size[3];
  if (format == CUDNN_TENSOR_NHWC) {
    stride[0] = h * w * c, stride[1] = 1, stride[2] = w * c, stride[3] = c;
  } else {
    stride[0] = c * h * w, stride[1] = h * w, stride[2] = w, stride[3] = 1;
  }
}

bool known_type(cudnnDataType_t type) { return element_size(type) != 0; }

}  // namespace

std::string describe(const cudnnTensorStruct& t) {
  return list(t.size) + " strides " + list(t.stride) + " " + type_name(t.type);
}

std::string describe(const cudnnFilterStruct& f) {
  return list(f.size) + (f.format == CUDNN_TENSOR_NHWC ? " KRSC " : " KCRS ") + type_name(f.type);
}

Layout layout_of(const cudnnTensorStruct& t) {
  if (non_overlapping(t.size, t.stride, {0, 1, 2, 3})) return Layout::nchw;
  if (non_overlapping(t.size, t.stride, {0, 2, 3, 1})) return Layout::nhwc;
  return Layout::other;
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::nchw: return "NCHW";
    case Layout::nhwc: return "NHWC";
    default: return "neither NCHW nor NHWC (overlapping or permuted strides)";
  }
}

size_t span_bytes(const cudnnTensorStruct& t) {
  int64_t last = 0;
  for (int d = 0; d < 4; ++d) last += (t.size[d] - 1) * t.stride[d];
  return size_t(last + 1) * element_size(t.type);
}

size_t span_bytes(const cudnnFilterStruct& f) {
  return size_t(f.size[0] * f.size[1] * f.size[2] * f.size[3]) * element_size(f.type);
}

}  // namespace brigade::emu::dnn

namespace dnn = brigade::emu::dnn;

// ---- tensor descriptors -------------------------------------------------------------------------------

// API reference, cudnn_ops library, "cudnnCreateTensorDescriptor()" / "cudnnDestroyTensorDescriptor()".
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  if (!tensorDesc)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateTensorDescriptor: tensorDesc is NULL");
  *tensorDesc = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  delete tensorDesc;  // destroying NULL is a no-op, as cuDNN's own
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_ops library, "cudnnSetTensor4dDescriptorEx()": any dim below 1 or stride below
// 0, or a data type the emulation does not know, is CUDNN_STATUS_BAD_PARAM. (The reference names
// negative values; a 0-sized dim is rejected too, since no convolution can run on it.)
cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int n,
                                           int c, int h, int w, int nStride, int cStride, int hStride,
                                           int wStride) {
  const char* call = "cudnnSetTensor4dDescriptorEx";
  if (!tensorDesc) return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": tensorDesc is NULL");
  const cudnnTensorStruct stated{true, dataType, {n, c, h, w}, {nStride, cStride, hStride, wStride}};
  for (int d = 0; d < 4; ++d)
    if (stated.size[d] < 1 || stated.stride[d] < 0)
      return dnn::fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": " + dnn::describe(stated) +
                                                   " has a dim below 1 or a negative stride");
  if (!dnn::known_type(dataType))
    return dnn::fail(CUDNN_STATUS_BAD_PARAM,
                     std::string(call) + ": data type " + std::to_string(int(dataType)) +
                         " is not FLOAT, DOUBLE, HALF or BFLOAT16 (the types the emulation runs)");
  *tensorDesc = stated;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_ops library, "cudnnSetTensor4dDescriptor()": packed strides for the format.
// NCHW_VECT_C (and any other format) is CUDNN_STATUS_BAD_PARAM here; it needs int8 data, which the
// emulation does not run.
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensor4dDescriptor: format " + std::to_string(int(format)) +
                                                 " is not CUDNN_TENSOR_NCHW or CUDNN_TENSOR_NHWC");
  const int64_t size[4] = {n, c, h, w};
  int64_t stride[4];
  dnn::packed_strides(format, size, stride);
  for (int64_t s : stride)
    if (s > INT32_MAX)
      return dnn::fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnSetTensor4dDescriptor: [" + std::to_string(n) + "," +
                                                       std::to_string(c) + "," + std::to_string(h) + "," +
                                                       std::to_string(w) + "] has a stride beyond int");
  return cudnnSetTensor4dDescriptorEx(tensorDesc, dataType, n, c, h, w, int(stride[0]), int(stride[1]),
                                      int(stride[2]), int(stride[3]));
}

// API reference, cudnn_ops library, "cudnnGetTensor4dDescriptor()".
cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t* dataType,
                                         int* n, int* c, int* h, int* w, int* nStride, int* cStride, int* hStride,
                                         int* wStride) {
  if (!tensorDesc || !dataType || !n || !c || !h || !w || !nStride || !cStride || !hStride || !wStride)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetTensor4dDescriptor: a pointer is NULL");
  if (!tensorDesc->set)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensor4dDescriptor: the descriptor was never set");
  *dataType = tensorDesc->type;
  int* sizes[4] = {n, c, h, w};
  int* strides[4] = {nStride, cStride, hStride, wStride};
  for (int d = 0; d < 4; ++d) *sizes[d] = int(tensorDesc->size[d]), *strides[d] = int(tensorDesc->stride[d]);
  return CUDNN_STATUS_SUCCESS;
}

// ---- filter descriptors -------------------------------------------------------------------------------

// API reference, cudnn_ops library, "cudnnCreateFilterDescriptor()" / "cudnnDestroyFilterDescriptor()".
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  if (!filterDesc)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateFilterDescriptor: filterDesc is NULL");
  *filterDesc = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_ops library, "cudnnSetFilter4dDescriptor()": a packed filter, KCRS for NCHW
// and KRSC for NHWC. A dim below 1, another format or an unknown type is CUDNN_STATUS_BAD_PARAM.
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  const std::string call = "cudnnSetFilter4dDescriptor";
  if (!filterDesc) return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, call + ": filterDesc is NULL");
  if (k < 1 || c < 1 || h < 1 || w < 1)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, call + ": [" + std::to_string(k) + "," + std::to_string(c) + "," +
                                                 std::to_string(h) + "," + std::to_string(w) + "] has a dim below 1");
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, call + ": format " + std::to_string(int(format)) +
                                                 " is not CUDNN_TENSOR_NCHW or CUDNN_TENSOR_NHWC");
  if (!dnn::known_type(dataType))
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, call + ": data type " + std::to_string(int(dataType)) +
                                                 " is not FLOAT, DOUBLE, HALF or BFLOAT16");
  *filterDesc = cudnnFilterStruct{true, dataType, format, {k, c, h, w}};
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_ops library, "cudnnGetFilter4dDescriptor()".
cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t filterDesc, cudnnDataType_t* dataType,
                                         cudnnTensorFormat_t* format, int* k, int* c, int* h, int* w) {
  if (!filterDesc || !dataType || !format || !k || !c || !h || !w)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetFilter4dDescriptor: a pointer is NULL");
  if (!filterDesc->set)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetFilter4dDescriptor: the descriptor was never set");
  *dataType = filterDesc->type;
  *format = filterDesc->format;
  *k = int(filterDesc->size[0]), *c = int(filterDesc->size[1]), *h = int(filterDesc->size[2]),
  *w = int(filterDesc->size[3]);
  return CUDNN_STATUS_SUCCESS;
}

// ---- convolution descriptors --------------------------------------------------------------------------

// API reference, cudnn_cnn library, "cudnnCreateConvolutionDescriptor()" / "...Destroy...()". A new
// descriptor has CUDNN_DEFAULT_MATH and a group count of 1, as cuDNN's.
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  if (!convDesc)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateConvolutionDescriptor: convDesc is NULL");
  *convDesc = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_cnn library, "cudnnSetConvolution2dDescriptor()": CUDNN_STATUS_BAD_PARAM for a
// negative padding, a stride or dilation below 1, or a mode or compute type that is no enumerant.
// The compute type is checked against the data when a call uses it (the supported "data type
// configurations" of each convolution function).
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u,
                                              int v, int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  const std::string call = "cudnnSetConvolution2dDescriptor";
  if (!convDesc) return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, call + ": convDesc is NULL");
  const std::string geometry = "pad (" + std::to_string(pad_h) + "," + std::to_string(pad_w) + ") stride (" +
                               std::to_string(u) + "," + std::to_string(v) + ") dilation (" +
                               std::to_string(dilation_h) + "," + std::to_string(dilation_w) + ")";
  if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 || dilation_w < 1)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM,
                     call + ": " + geometry + ": padding must be >= 0, stride and dilation >= 1");
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, call + ": mode " + std::to_string(int(mode)) + " is no enumerant");
  if (computeType < CUDNN_DATA_FLOAT || computeType > CUDNN_DATA_COMPLEX_FP64)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM,
                     call + ": compute type " + std::to_string(int(computeType)) + " is no enumerant");
  convDesc->set = true;
  convDesc->pad[0] = pad_h, convDesc->pad[1] = pad_w;
  convDesc->stride[0] = u, convDesc->stride[1] = v;
  convDesc->dilation[0] = dilation_h, convDesc->dilation[1] = dilation_w;
  convDesc->mode = mode;
  convDesc->compute = computeType;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_cnn library, "cudnnGetConvolution2dDescriptor()".
cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t convDesc, int* pad_h, int* pad_w,
                                              int* u, int* v, int* dilation_h, int* dilation_w,
                                              cudnnConvolutionMode_t* mode, cudnnDataType_t* computeType) {
  if (!convDesc || !pad_h || !pad_w || !u || !v || !dilation_h || !dilation_w || !mode || !computeType)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetConvolution2dDescriptor: a pointer is NULL");
  if (!convDesc->set)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolution2dDescriptor: the descriptor was never set");
  *pad_h = convDesc->pad[0], *pad_w = convDesc->pad[1], *u = convDesc->stride[0], *v = convDesc->stride[1];
  *dilation_h = convDesc->dilation[0], *dilation_w = convDesc->dilation[1];
  *mode = convDesc->mode;
  *computeType = convDesc->compute;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_cnn library, "cudnnSetConvolutionMathType()" / "cudnnGetConvolutionMathType()".
// The emulation computes every math type alike (exact products, f32 or f64 sums); what the type
// changes is what the heuristics report (cudnn_algorithms.cpp).
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
  if (!convDesc)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnSetConvolutionMathType: convDesc is NULL");
  if (mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM,
                     "cudnnSetConvolutionMathType: math type " + std::to_string(int(mathType)) + " is no enumerant");
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t* mathType) {
  if (!convDesc || !mathType)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetConvolutionMathType: a pointer is NULL");
  *mathType = convDesc->math;
  return CUDNN_STATUS_SUCCESS;
}

// API reference, cudnn_cnn library, "cudnnSetConvolutionGroupCount()": input channels c and output
// channels k split into `groupCount` independent convolutions; the filter then has c / groupCount
// input channels.
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
  if (!convDesc)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnSetConvolutionGroupCount: convDesc is NULL");
  if (groupCount < 1)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM,
                     "cudnnSetConvolutionGroupCount: group count " + std::to_string(groupCount) + " is below 1");
  convDesc->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int* groupCount) {
  if (!convDesc || !groupCount)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnGetConvolutionGroupCount: a pointer is NULL");
  *groupCount = convDesc->groups;
  return CUDNN_STATUS_SUCCESS;
}
