// TEMPORARY during parallel development: weak stand-ins for ops not written yet, so the library
// links while they are. Every real definition overrides these. Deleted before the work lands.
#include "autograd/functions.h"
#include "kernels/ops.h"
#pragma GCC diagnostic ignored "-Wunused-parameter"

namespace brigade::ops {
[[gnu::weak]] void copy_(const Tensor& dst, const Tensor& src) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void fill_(const Tensor& dst, double value) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor contiguous(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor clone(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor to_dtype(const Tensor& x, DType dtype) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor unary(UnaryOp op, const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor scale_shift(const Tensor& x, double scale, double shift) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor pow_scalar(const Tensor& x, double exponent) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor pow_scalar_backward(const Tensor& grad_y, const Tensor& x, double exponent) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void add_(const Tensor& dst, const Tensor& src, double alpha) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void scale_(const Tensor& dst, double factor) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor sum_to(const Tensor& x, const Shape& shape) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor max_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, int64_t dim, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor softmax(const Tensor& x, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor log_softmax(const Tensor& x, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor matmul(const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] NormOutput layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor layer_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] std::pair<Tensor, Tensor> layer_norm_backward_params(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const Tensor& bias, const NormOutput& saved) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] NormOutput rms_norm(const Tensor& x, const Tensor& weight, double eps) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor rms_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor rms_norm_backward_weight(const Tensor& grad_y, const Tensor& x, const NormOutput& saved) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor embedding(const Tensor& weight, const Tensor& indices) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor embedding_backward(const Tensor& grad_y, const Tensor& indices, int64_t num_embeddings) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Reduction reduction) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets, const CrossEntropyOutput& saved, int64_t ignore_index, Reduction reduction) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor dropout_backward(const Tensor& grad_y, double p, uint64_t seed, uint64_t offset) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor concat(const std::vector<Tensor>& xs, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dParams p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor conv2d_backward_input(const Tensor& grad_y, const Tensor& weight, const Shape& x_shape, Conv2dParams p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor conv2d_backward_weight(const Tensor& grad_y, const Tensor& x, const Shape& weight_shape, Conv2dParams p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor conv2d_backward_bias(const Tensor& grad_y) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] std::pair<Tensor, Tensor> max_pool2d(const Tensor& x, Pool2dParams p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor max_pool2d_backward(const Tensor& grad_y, const Tensor& indices, const Shape& x_shape, Pool2dParams p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor avg_pool2d(const Tensor& x, Pool2dParams p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor avg_pool2d_backward(const Tensor& grad_y, const Shape& x_shape, Pool2dParams p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m, const std::vector<Tensor>& v, const AdamWParams& p) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void check_same_device(const char* op, const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void check_defined(const char* op, const Tensor& x, const char* name) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void check_floating(const char* op, const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] void check_cpu_backend(const char* op, const Tensor& x) { ::brigade::fail("not implemented yet"); }
}  // namespace brigade::ops

namespace brigade {
[[gnu::weak]] Tensor add(const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor sub(const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor mul(const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor div(const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor add(const Tensor& a, double b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor mul(const Tensor& a, double b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor neg(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor exp(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor log(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor sqrt(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor rsqrt(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor pow(const Tensor& x, double exponent) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor tanh(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor relu(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor gelu(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor silu(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor sigmoid(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor sum(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor mean(const Tensor& x) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor max(const Tensor& x, int64_t dim, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor matmul(const Tensor& a, const Tensor& b) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor softmax(const Tensor& x, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor log_softmax(const Tensor& x, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor embedding(const Tensor& weight, const Tensor& indices) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, ops::Reduction reduction) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor dropout(const Tensor& x, double p, bool training) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor concat(const std::vector<Tensor>& xs, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor stack(const std::vector<Tensor>& xs, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] std::vector<Tensor> split(const Tensor& x, int64_t chunk_size, int64_t dim) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor causal_mask(int64_t T, Device device) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) { ::brigade::fail("not implemented yet"); }
[[gnu::weak]] Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) { ::brigade::fail("not implemented yet"); }
}  // namespace brigade
