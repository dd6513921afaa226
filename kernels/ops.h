// brigade::ops — the checked, device-dispatched kernels. No autograd here.
//
// Every op follows one pattern (see kernels/elementwise.cpp for the model):
//   1. check the inputs once, throwing brigade::Error that names the op and the offending shapes,
//      dtypes or devices;
//   2. on the CPU, widen bf16/f16 inputs to f32 (the reference computes in f32/f64; results are
//      narrowed back) — CUDA kernels take bf16/f16 directly and accumulate in f32;
//   3. dispatch on the device with BRIGADE_DISPATCH (kernels/dispatch.h): kernels/cpu/*.cpp or
//      kernels/cuda/*.cu, twins with the same signature.
// Outputs are new contiguous tensors unless the name ends in '_' (in place).
//
// The differentiable API users call (brigade::matmul, brigade::layer_norm, ...) lives in
// autograd/functions.h: each function there runs these ops forward and records how to run them
// backward. The *_backward ops below exist so that every backward pass is a kernel with a CPU
// reference and a CUDA twin rather than a chain of small ops.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/params.h"

namespace brigade::ops {

// ---- copies and fills (kernels/copy.cpp) ----
// dst[...] = src[...], converting dtype; src broadcasts to dst's shape. dst may be any strided view.
void copy_(const Tensor& dst, const Tensor& src);
void fill_(const Tensor& dst, double value);
Tensor contiguous(const Tensor& x);  // x itself when already contiguous
Tensor clone(const Tensor& x);       // always a fresh contiguous copy
Tensor to_dtype(const Tensor& x, DType dtype);

// ---- elementwise (kernels/elementwise.cpp) ----
enum class BinaryOp { add, sub, mul, div };
enum class UnaryOp { neg, exp, log, sqrt, rsqrt, tanh, relu, gelu, silu, sigmoid };
const char* binary_op_name(BinaryOp op);
const char* unary_op_name(UnaryOp op);

// Broadcasting binary op; a and b must share dtype and device.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor unary(UnaryOp op, const Tensor& x);
// grad_x of y = op(x), given grad_y and x (and y, which some ops use: exp, tanh, sigmoid, sqrt, rsqrt).
Tensor unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y);
Tensor scale_shift(const Tensor& x, double scale, double shift);  // x * scale + shift
Tensor pow_scalar(const Tensor& x, double exponent);
Tensor pow_scalar_backward(const Tensor& grad_y, const Tensor& x, double exponent);
void add_(const Tensor& dst, const Tensor& src, double alpha = 1);  // dst += alpha * src (src broadcasts)
void scale_(const Tensor& dst, double factor);                     // dst *= factor
// x where mask == 0, else value. mask is any dtype (non-zero = true) and broadcasts to x.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions (kernels/reduce.cpp) ----
// Sum over `dims` (empty = all dims). keepdim keeps reduced dims with size 1.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
// Max over one dim: values and i64 indices (first maximum on ties).
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim);
// Sums a broadcast gradient back down to `shape` (the inverse of broadcasting). Returns x itself,
// not a copy, when its shape already is `shape` — every add's backward relies on that being free.
Tensor sum_to(const Tensor& x, const Shape& shape);
// Scatters grad (shape of max's values) to the argmax positions of a tensor of `input_shape`.
Tensor max_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, int64_t dim, bool keepdim);

// ---- softmax (kernels/softmax.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim);

// ---- fused attention (kernels/attention.cpp) ----
// softmax(scale q k^T, causal mask) v with dropout on the weights, never holding the [Tq, Tk] scores
// (AttentionParams in kernels/params.h says which keys a query sees and how dropout draws its mask).
// q [B, H, Tq, D], k and v [B, H, Tk, D], the same floating dtype and device; any strides.
struct AttentionOutput {
  Tensor y;    // [B, H, Tq, D], laid out as [B, Tq, H, D]: y.transpose(1, 2) is contiguous
  Tensor lse;  // [B, H, Tq] log-sum-exp of each query's scaled scores, saved for the backward
};
AttentionOutput attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p);
struct AttentionGrads {
  Tensor q, k, v;  // contiguous, shaped like the inputs
};
AttentionGrads attention_backward(const Tensor& grad_y, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionOutput& saved, const AttentionParams& p);
// The checks both run first (shapes, dtypes, devices, dropout, scale), for a caller that must know
// the inputs are good before it commits to something, such as taking dropout's random counters.
void check_attention_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionParams& p);

// ---- matmul (kernels/matmul.cpp) ----
// a [..., m, k] @ b [..., k, n] -> [..., m, n], batch dims broadcast; 1-D operands are treated as a
// row (a) or column (b) vector and that dim is removed from the result, as in NumPy.
// Transposed views are consumed through their strides, without copies where the kernel allows.
Tensor matmul(const Tensor& a, const Tensor& b);

// Which GEMM a matmul of GPU tensors runs. The CPU has one GEMM and ignores the choice.
//   automatic    cuBLAS: reproducible bits, and the fastest we know of without measuring;
//   cublas       cublasGemmStridedBatchedEx: f32, f64, bf16, f16;
//   tiled        the hand-written shared-memory GEMM (kernels/cuda/gemm_tiled.cu): f32, bf16, f16
//                inputs, computed in f32;
//   tensor_core  the hand-written mma.sync GEMM (kernels/cuda/gemm_tensor_core.cu): bf16, f16;
//   hopper       the hand-written TMA + wgmma GEMM for sm_90 (kernels/cuda/gemm_hopper.cu): bf16, f16;
//                operands not contiguous along k are copied first (a linear layer's x @ Wᵀ needs none);
//   tuned        measured per problem on this GPU (kernels/cuda/gemm_tuner.h), like cuDNN's benchmark
//                mode: the first call of each shape, dtype, layout and epilogue runs cuBLAS, tensor_core
//                and hopper (16-bit only; hopper on sm_90), drops any that does not compute
//                cuBLAS's product exactly on synthetic integer operands (a warning on stderr), and
//                keeps the fastest for later calls. Every dtype (f32, f64 and problems below 2²⁷
//                flops simply run cuBLAS).
// automatic stays cuBLAS, and tuned is opt-in, because bits matter: the backends round differently,
// so under tuned the bits depend on which kernel won the timing — a choice timing noise can flip
// between runs or machines (the pipeline's tests compare a pipelined run to a one-device run bit
// for bit). Opt in when speed matters more than bitwise reproducibility across runs.
// Asking a backend for a dtype it has no kernel for is an error that names both.
enum class MatmulBackend { automatic, cublas, tiled, tensor_core, hopper, tuned };
const char* matmul_backend_name(MatmulBackend backend);  // "automatic", "cublas", ...
void set_matmul_backend(MatmulBackend backend);           // process-wide; the default is automatic
MatmulBackend matmul_backend();
Tensor matmul(const Tensor& a, const Tensor& b, MatmulBackend backend);  // this call only
// Whether `backend` can run on `device` (hopper: an sm_90 GPU and a build for gpu_arch 90; the CPU
// takes any backend and ignores it; a GPU this machine does not have takes none).
bool matmul_backend_available(MatmulBackend backend, Device device);
// A linear layer, fused: y = act(x @ weight^T + bias) with x [..., in], weight [out, in], bias [out]
// (undefined: none) — one GEMM whose epilogue adds the bias and applies the activation on the way
// out, instead of three passes over [rows, out]. The bits equal those of matmul, add and gelu run
// one after the other (kernels/twins/matmul.inc says where it rounds). With keep_pre, `pre` holds
// x @ weight^T + bias, the activation's input, which its backward needs (for act none, pre is y).
struct LinearOutput {
  Tensor y, pre;
};
LinearOutput linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, bool keep_pre);
LinearOutput linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, bool keep_pre,
                    MatmulBackend backend);  // this call only
// What the tuned backend measured for one problem, for benchmarks and tests: matmul_tunings() lists
// every problem it has measured since the last clear, oldest first (none in a build without CUDA).
struct MatmulTuning {
  std::string problem;  // the key, readable: device, dtypes, shapes, each operand's layout, the epilogue
  MatmulBackend chosen = MatmulBackend::cublas;
  std::vector<std::pair<MatmulBackend, double>> ms;  // median milliseconds of each candidate that agreed
  std::vector<MatmulBackend> excluded;                // the candidates that failed the exact check or refused
};
std::vector<MatmulTuning> matmul_tunings();
int64_t matmul_tuning_count();  // tunings run so far (clear_matmul_tunings does not reset it)
void clear_matmul_tunings();    // forgets every choice: each problem is measured again on its next call
// Whether f32 matmuls and convolutions on a GPU may use TF32 tensor cores (inputs rounded to a 10-bit
// mantissa: several times faster, ~1e-3 relative error). Off by default, so f32 means f32.
void set_allow_tf32(bool allow);
bool allow_tf32();

// ---- normalisation (kernels/norm.cpp) ----
// Over the last dim of x. weight/bias have shape [x.size(-1)]; either may be undefined (no affine).
// The statistics are saved in the compute dtype: f64 for f64 inputs (so an f64 backward is as accurate
// as f64 allows), f32 for f32, bf16 and f16 inputs.
struct NormOutput {
  Tensor y;
  Tensor mean;  // [rows] f32 or f64 (undefined for rms_norm)
  Tensor rstd;  // [rows] f32 or f64: 1 / sqrt(var + eps), or 1 / sqrt(mean(x^2) + eps) for rms_norm
};
NormOutput layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
Tensor layer_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved);
// {grad_weight, grad_bias} (each undefined when the corresponding parameter is).
std::pair<Tensor, Tensor> layer_norm_backward_params(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, const NormOutput& saved);
// Residual add + layer_norm, fused: sum = x + residual (x's dtype, the bits add() gives), and
// norm = layer_norm(sum) — one pass over the rows instead of two. x and residual have one shape.
struct AddNormOutput {
  Tensor sum;
  NormOutput norm;
};
AddNormOutput add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                             double eps);
// Its backward: layer_norm_backward_input(grad_y, sum, ...) + grad_sum in one pass (grad_sum: the
// gradient of `sum` from its other uses; the result is the gradient of both x and residual).
Tensor add_layer_norm_backward_input(const Tensor& grad_y, const Tensor& grad_sum, const Tensor& sum,
                                     const Tensor& weight, const NormOutput& saved);
NormOutput rms_norm(const Tensor& x, const Tensor& weight, double eps);
Tensor rms_norm_backward_input(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const NormOutput& saved);
Tensor rms_norm_backward_weight(const Tensor& grad_y, const Tensor& x, const NormOutput& saved);

// ---- index tensors (kernels/checked_indices.cpp) ----
// An index tensor an op has scanned: every value but ignore_index is in [0, limit). A backward handed
// the forward's CheckedIndices skips its own scan (on a GPU, a wait for the device) when it gets the
// same tensor, not written in place since; anything else is scanned again.
// (For i32 indices, `indices` is an i64 copy kept until the backward: 8 bytes an index.)
struct CheckedIndices {
  Tensor source;                // the tensor the op was given
  Storage source_storage;       // its storage then (the tensor's could be swapped, as Module::replace_data does)
  uint64_t source_version = 0;  // that storage's version when scanned
  Tensor indices;               // contiguous i64, what the kernels read (may share source's storage)
  int64_t limit = 0;
  std::optional<int64_t> ignore_index;
  int64_t counted = 0;  // values that are not ignore_index; -1 when only the device knows:
  Tensor counted_on_device;  // then its first i64 element is the count (a CUDA graph capture)
  bool covers(const Tensor& t, int64_t limit, std::optional<int64_t> ignore_index) const;
};

// ---- embedding (kernels/embedding.cpp) ----
// weight [V, D], indices i32/i64 of any shape -> [..., D]. Out-of-range indices throw. `checked`, if
// given, receives the scanned indices for embedding_backward.
Tensor embedding(const Tensor& weight, const Tensor& indices, CheckedIndices* checked = nullptr);
// Deterministic: each row of the result sums its contributions in index order (no atomics).
Tensor embedding_backward(const Tensor& grad_y, const Tensor& indices, int64_t num_embeddings,
                          const CheckedIndices* checked = nullptr);

// ---- cross entropy (kernels/cross_entropy.cpp) ----
using brigade::Reduction;
struct CrossEntropyOutput {
  Tensor loss;  // scalar: f64 for f64 logits, else f32 (a 16-bit loss would keep 3 significant digits)
  Tensor lse;   // [N] log-sum-exp per row, saved for backward: f64 for f64 logits, else f32
  int64_t count = 0;  // targets that were not ignore_index, the mean's denominator (= targets.counted; -1: see there)
  CheckedIndices targets;  // what cross_entropy_backward needs not scan again
};
// logits [N, C], targets [N] (i32/i64). Targets equal to ignore_index contribute nothing; a mean over
// zero counted targets is 0.
CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Reduction reduction);
// grad_loss is the scalar upstream gradient.
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                              const CrossEntropyOutput& saved, int64_t ignore_index, Reduction reduction);

// ---- rotary position embedding (kernels/rope.cpp) ----
// inv_freq[i] of RopeParams for a head of size D (even), i < D/2, after any llama3 scaling: in f64.
std::vector<double> rope_frequencies(int64_t head_dim, const RopeParams& p);
// cos and sin of each angle position * inv_freq[i] for positions [start, start + count): [count, D/2]
// each, computed in f64 and rounded once to `dtype` (f32 or f64: the compute dtype of the inputs the
// table will turn). Positions are explicit so that a KV-cache step or a pipeline stage turns its
// tokens by where they sit in the sequence, not by where they sit in the batch.
struct RopeTable {
  Tensor cos, sin;
};
RopeTable rope_table(int64_t head_dim, int64_t start, int64_t count, const RopeParams& p, DType dtype, Device device);
// x [B, H, T, D] (any strides) turned by the table's T rows: for i < D/2, with c, s = table[t, i],
//   y[i] = x[i] c - x[i + D/2] s,   y[i + D/2] = x[i + D/2] c + x[i] s.
// The table's dtype is x's compute dtype (f64 for f64, else f32) and its device x's. y is contiguous.
Tensor rope(const Tensor& x, const RopeTable& table);
// The backward: a rotation's transpose is the rotation by -angle, so grad_x is rope with s negated.
Tensor rope_backward(const Tensor& grad_y, const RopeTable& table);

// ---- SwiGLU's gate (kernels/swiglu.cpp) ----
// silu(gate) * up, elementwise over two tensors of one shape, dtype and device: the two halves of a
// SwiGLU MLP's hidden layer in one pass, without silu(gate) ever stored. The result is rounded once.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// {grad_gate, grad_up} = {grad_y * up * silu'(gate), grad_y * silu(gate)}, one pass.
std::pair<Tensor, Tensor> swiglu_backward(const Tensor& grad_y, const Tensor& gate, const Tensor& up);

// ---- dropout (kernels/dropout.cpp) ----
// Keeps each element with probability 1 - p, scaling kept ones by 1 / (1 - p). Element i is dropped
// when philox_uniform(seed, offset + i) < p, so the mask is never stored: backward recomputes it.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);
Tensor dropout_backward(const Tensor& grad_y, double p, uint64_t seed, uint64_t offset);

// ---- joining (kernels/concat.cpp) ----
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

// ---- convolution and pooling (kernels/conv.cpp, kernels/pool.cpp) ----
// x [N, C, H, W], weight [O, C, KH, KW], bias [O] or undefined. Symmetric padding.
struct Conv2dParams {
  int64_t stride = 1;
  int64_t padding = 0;
};
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dParams p);
Tensor conv2d_backward_input(const Tensor& grad_y, const Tensor& weight, const Shape& x_shape, Conv2dParams p);
Tensor conv2d_backward_weight(const Tensor& grad_y, const Tensor& x, const Shape& weight_shape, Conv2dParams p);
Tensor conv2d_backward_bias(const Tensor& grad_y);  // sum over N, H, W
// Which kernels conv2d and its backward ops run for GPU tensors (ignored on the CPU): cuDNN, or the
// hand-written direct convolution (kernels/cuda/conv_direct.cu, the reference). automatic is cuDNN
// when the build has it, else direct; asking for cudnn in a build without it is an error.
enum class ConvBackend { automatic, cudnn, direct };
void set_conv_backend(ConvBackend backend);  // process-wide; the default is automatic
ConvBackend conv_backend();

struct Pool2dParams {
  int64_t kernel = 2;
  int64_t stride = 2;
  int64_t padding = 0;
};
// Max pooling returns values and the flat (h * W + w) argmax per output element (i64).
std::pair<Tensor, Tensor> max_pool2d(const Tensor& x, Pool2dParams p);
Tensor max_pool2d_backward(const Tensor& grad_y, const Tensor& indices, const Shape& x_shape, Pool2dParams p);
// Average pooling; padded positions count in the divisor (count_include_pad, PyTorch's default).
Tensor avg_pool2d(const Tensor& x, Pool2dParams p);
Tensor avg_pool2d_backward(const Tensor& grad_y, const Shape& x_shape, Pool2dParams p);

// ---- optimizer update (kernels/adamw.cpp) ----
// One AdamW step on a list of parameters in place (one call updates many tensors, as the fused CUDA
// kernel does). step is 1-based. m and v are f32 or f64 (the same dtype for both), shaped like each
// parameter; f64 parameters keep f64 state.
// The hyperparameters are AdamWParams (kernels/params.h), the struct optim::AdamWOptions also is.
void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                 const std::vector<Tensor>& v, const AdamWParams& p);

// ---- shared checks (kernels/checks.cpp) ----
// "op: tensors on different devices: a is on cpu, b is on cuda:0" and friends.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
void check_defined(const char* op, const Tensor& x, const char* name);
void check_floating(const char* op, const Tensor& x);
// In-place ops: a destination must not hold one element twice (a stride-0 dim of size > 1, as an
// expanded view has), or writes would race and sum wrongly.
void check_no_self_overlap(const char* op, const Tensor& dst);
// Whether a and b share storage and their byte ranges intersect (conservative: may say yes for
// interleaved views that never touch the same element). In-place ops clone such a source first.
bool may_overlap(const Tensor& a, const Tensor& b);
// Throws unless the tensor is on the CPU: BRIGADE_DISPATCH calls it before a CPU kernel, so a device
// this build has no kernels for (a GPU tensor without CUDA) is an error naming the op, not a crash.
void check_cpu_backend(const char* op, const Tensor& x);

}  // namespace brigade::ops
