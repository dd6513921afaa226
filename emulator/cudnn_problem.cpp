// The emulated cuDNN's consistency checks of one convolution: do the tensor, filter and convolution
// descriptors a call names describe one valid convolution, and what are its sizes.
//
// Models (cuDNN API reference, cudnn_cnn library): cudnnGetConvolution2dForwardOutputDim, and the
// CUDNN_STATUS_BAD_PARAM conditions each convolution function lists (mismatched data types, input
// channels that are not the filter's times the group count, output channels that are not the
// filter's count, an output tensor whose dims are not the ones the convolution gives). Does not
// model: N-d convolutions.
#include <string>

#include "emulator/cudnn_emulated.h"

namespace brigade::emu::dnn {
namespace {

// A convolution's output length along one dim: 1 + (in + 2 * pad - dilated_filter) / stride, where
// dilated_filter = (filter - 1) * dilation + 1 (cudnnGetConvolution2dForwardOutputDim). 0 when the
// dilated filter does not fit in the padded input: C++ division would round -1 / 2 to 0 and give 1.
int64_t output_length(int64_t in, int64_t pad, int64_t filter, int64_t stride, int64_t dilation) {
  const int64_t dilated = (filter - 1) * dilation + 1;
  if (in + 2 * pad < dilated) return 0;
  return 1 + (in + 2 * pad - dilated) / stride;
}

std::string pair(const int* v) { return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + ")"; }

std::string geometry(const cudnnConvolutionStruct& conv) {
  return "pad " + pair(conv.pad) + " stride " + pair(conv.stride) + " dilation " + pair(conv.dilation) +
         (conv.mode == CUDNN_CONVOLUTION ? " CONVOLUTION" : " CROSS_CORRELATION") +
         (conv.groups > 1 ? " groups " + std::to_string(conv.groups) : "");
}

// Filter strides, in elements, in (k, c, r, s) order.
void filter_strides(const cudnnFilterStruct& f, int64_t* stride) {
  const int64_t c = f.size[1], r = f.size[2], s = f.size[3];
  if (f.format == CUDNN_TENSOR_NHWC) {
    stride[0] = r * s * c, stride[1] = 1, stride[2] = s * c, stride[3] = c;
  } else {
    stride[0] = c * r * s, stride[1] = r * s, stride[2] = s, stride[3] = 1;
  }
}

// CUDNN_STATUS_BAD_PARAM unless x, w and conv agree: x's channels are the filter's times the group
// count, and the filter's output channels split into the groups.
cudnnStatus_t check_channels(const std::string& where, const OperandNames& names, const cudnnTensorStruct& x,
                             const cudnnFilterStruct& w, const cudnnConvolutionStruct& conv) {
  if (x.size[1] != w.size[1] * conv.groups)
    return fail(CUDNN_STATUS_BAD_PARAM, where + ": " + names.x + " has " + std::to_string(x.size[1]) +
                                            " channels, but " + names.w + " has " + std::to_string(w.size[1]) +
                                            " input channels per group and the group count is " +
                                            std::to_string(conv.groups));
  if (w.size[0] % conv.groups != 0)
    return fail(CUDNN_STATUS_BAD_PARAM, where + ": " + names.w + "'s " + std::to_string(w.size[0]) +
                                            " output channels do not split into " + std::to_string(conv.groups) +
                                            " groups");
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

OperandNames operand_names(Direction direction) {
  switch (direction) {
    case Direction::forward: return {"xDesc", "wDesc", "yDesc"};
    case Direction::backward_data: return {"dxDesc", "wDesc", "dyDesc"};
    default: return {"xDesc", "dwDesc", "dyDesc"};
  }
}

cudnnStatus_t make_problem(const char* call, Direction direction, const cudnnTensorStruct* x,
                           const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                           const cudnnTensorStruct* y, Problem* problem) {
  const OperandNames names = operand_names(direction);
  const std::string where = call;
  if (!x || !w || !conv || !y)
    return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, where + ": " + (!x ? names.x : !w ? names.w : !y ? names.y
                                                                                                    : "convDesc") +
                                                         " is NULL");
  if (!x->set || !w->set || !conv->set || !y->set)
    return fail(CUDNN_STATUS_BAD_PARAM, where + ": " + (!x->set ? names.x : !w->set ? names.w : !y->set ? names.y
                                                                                                     : "convDesc") +
                                            " was created but never set");
  const std::string text = std::string(names.x) + " " + describe(*x) + ", " + names.w + " " + describe(*w) + ", " +
                           names.y + " " + describe(*y) + ", " + geometry(*conv);
  if (x->type != w->type || x->type != y->type)
    return fail(CUDNN_STATUS_BAD_PARAM, where + ": the data types differ: " + text);
  if (const cudnnStatus_t s = check_channels(where, names, *x, *w, *conv); s != CUDNN_STATUS_SUCCESS) return s;
  const int64_t out_h = output_length(x->size[2], conv->pad[0], w->size[2], conv->stride[0], conv->dilation[0]);
  const int64_t out_w = output_length(x->size[3], conv->pad[1], w->size[3], conv->stride[1], conv->dilation[1]);
  if (out_h == 0 || out_w == 0)
    return fail(CUDNN_STATUS_BAD_PARAM, where + ": the dilated filter is larger than the padded input: " + text);
  const int64_t expected[4] = {x->size[0], w->size[0], out_h, out_w};
  for (int d = 0; d < 4; ++d)
    if (y->size[d] != expected[d])
      return fail(CUDNN_STATUS_BAD_PARAM, where + ": " + names.y + " should be [" + std::to_string(expected[0]) +
                                              "," + std::to_string(expected[1]) + "," + std::to_string(out_h) + "," +
                                              std::to_string(out_w) + "] for " + text);

  Problem& p = *problem;
  p = Problem{};
  p.type = x->type, p.compute = conv->compute, p.math = conv->math, p.mode = conv->mode;
  p.n = x->size[0], p.c = x->size[1], p.h = x->size[2], p.w = x->size[3];
  p.k = w->size[0], p.r = w->size[2], p.s = w->size[3];
  p.out_h = out_h, p.out_w = out_w, p.groups = conv->groups;
  for (int i = 0; i < 2; ++i) p.pad[i] = conv->pad[i], p.stride[i] = conv->stride[i], p.dilation[i] = conv->dilation[i];
  for (int d = 0; d < 4; ++d) p.x_stride[d] = x->stride[d], p.y_stride[d] = y->stride[d];
  filter_strides(*w, p.w_stride);
  p.x_layout = layout_of(*x), p.y_layout = layout_of(*y);
  p.filter_format = w->format;
  p.x_bytes = span_bytes(*x), p.w_bytes = span_bytes(*w), p.y_bytes = span_bytes(*y);
  p.text = text;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace brigade::emu::dnn

namespace dnn = brigade::emu::dnn;

// API reference, cudnn_cnn library, "cudnnGetConvolution2dForwardOutputDim()": n from the input, c
// from the filter's output channels, h and w by the formula above. CUDNN_STATUS_BAD_PARAM when a
// descriptor is unset, the channels disagree, or the dilated filter does not fit in the padded input;
// CUDNN_STATUS_BAD_PARAM_NULL_POINTER for a null argument.
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int* n, int* c, int* h,
                                                    int* w) {
  const std::string where = "cudnnGetConvolution2dForwardOutputDim";
  if (!convDesc || !inputTensorDesc || !filterDesc || !n || !c || !h || !w)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, where + ": a descriptor or output pointer is NULL");
  if (!convDesc->set || !inputTensorDesc->set || !filterDesc->set)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, where + ": a descriptor was created but never set");
  const cudnnConvolutionStruct& conv = *convDesc;
  const cudnnTensorStruct& x = *inputTensorDesc;
  const cudnnFilterStruct& f = *filterDesc;
  const dnn::OperandNames names{"inputTensorDesc", "filterDesc", ""};
  if (const cudnnStatus_t s = dnn::check_channels(where, names, x, f, conv); s != CUDNN_STATUS_SUCCESS) return s;
  const int64_t out_h = dnn::output_length(x.size[2], conv.pad[0], f.size[2], conv.stride[0], conv.dilation[0]);
  const int64_t out_w = dnn::output_length(x.size[3], conv.pad[1], f.size[3], conv.stride[1], conv.dilation[1]);
  if (out_h == 0 || out_w == 0)
    return dnn::fail(CUDNN_STATUS_BAD_PARAM, where + ": filter " + dnn::describe(f) + " dilated by " +
                                                 dnn::pair(conv.dilation) + " is larger than input " +
                                                 dnn::describe(x) + " padded by " + dnn::pair(conv.pad));
  *n = int(x.size[0]), *c = int(f.size[0]), *h = int(out_h), *w = int(out_w);
  return CUDNN_STATUS_SUCCESS;
}
