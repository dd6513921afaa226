// The differentiable ops users call: brigade::add, brigade::matmul, brigade::layer_norm, ...
//
// Each function runs the checked kernel from kernels/ops.h forward and, when a tape is recording,
// records a Node whose backward calls the matching *_backward kernels. The forward and backward of
// an op sit side by side in one file under autograd/functions/, so each reads as one unit.
//
// The view methods on Tensor (view, transpose, slice, ...) are differentiable too; they are defined
// in autograd/functions/views.cpp.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/params.h"

namespace brigade {

// ---- elementwise (broadcasting) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // tanh approximation
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);  // mask non-zero -> value

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(const Tensor& a, double b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(const Tensor& a, double b);

// ---- dtype ----
// x converted to `dtype`; x itself when it already is. Between floating dtypes the gradient is
// converted back to x's dtype, so f32 parameters used in bf16 receive f32 gradients.
Tensor to_dtype(const Tensor& x, DType dtype);

// ---- reductions ----
Tensor sum(const Tensor& x);  // all elements -> scalar
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);  // values; gradient goes to the argmax
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // not differentiable

// ---- linear algebra and activations over a dim ----
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight^T + bias (bias may be undefined), weight [out, in]. One tape node with inputs
// {x, weight, bias}, so the input-grad / weight-grad split separates the two GEMMs.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// act(x @ weight^T + bias): the bias and activation run inside the GEMM's epilogue (one pass over the
// output instead of three), with the bits, and the tape nodes, of linear() followed by gelu().
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// Fused attention: softmax(q k^T / sqrt(D), causal mask) v with dropout p on the weights, one
// kernel each way, never holding the [Tq, Tk] weights (ops::attention, kernels/params.h for the
// mask and dropout rules). q [B, H, Tq, D], k and v [B, H, Tk, D]. Dropout's (seed, offset) come from
// the default generator, as dropout() on the composed weights would take them.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = true, double dropout = 0);
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params);

// ---- the pieces of a LLaMA-style block ----
// Rotary position embedding of x [B, H, T, D] (D even; any strides), HF's rotate_half layout: pair
// (i, i + D/2) of row t turns by the angle of table row t (ops::rope, ops::rope_table). cos and sin
// [T, D/2] are not differentiated; they have x's compute dtype (f64 for f64, else f32).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);
// The same with the table made for positions [start, start + T): a KV-cache step or a later pipeline
// stage passes where its tokens sit. nn::RotaryEmbedding keeps the table instead of remaking it.
Tensor rope(const Tensor& x, int64_t start, const RopeParams& params = {});
// silu(gate) * up in one kernel each way (ops::swiglu): SwiGLU's gate, gate and up of one shape.
Tensor swiglu(const Tensor& gate, const Tensor& up);

// ---- normalisation (over the last dim) ----
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
// A pre-LN transformer's residual add and the next norm, fused: {h, layer_norm(h)} with h = x +
// residual, one kernel forward and one backward (ops::add_layer_norm). The same bits as computing
// h = x + residual and layer_norm(h) apart.
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                         const Tensor& bias, double eps = 1e-5);

// ---- lookup, loss, regularisation ----
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);
// Identity unless `training`; the mask comes from (seed, offset) so it is reproducible on any device.
// Without an explicit seed the default generator supplies (seed, offset) and advances.
Tensor dropout(const Tensor& x, double p, bool training = true);
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);

// ---- joining and splitting ----
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
std::vector<Tensor> split(const Tensor& x, int64_t chunk_size, int64_t dim);  // last chunk may be smaller

// ---- masks ----
// [T, past + T] i32 tensor for masked_fill: 1 where key j comes after query i, whose position is
// past + i (the first `past` keys are earlier tokens, e.g. a KV cache's). past = 0: 1 above the
// diagonal of a square.
Tensor causal_mask(int64_t T, Device device = Device::cpu(), int64_t past = 0);

// ---- convolution and pooling (NCHW) ----
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride = 1, int64_t padding = 0);
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride = -1, int64_t padding = 0);  // stride -1 = kernel
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride = -1, int64_t padding = 0);

}  // namespace brigade
