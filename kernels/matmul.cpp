// ops: matmul. NumPy semantics on top of one batched kernel:
//   - a 1-D left operand [k] is a row [1, k], a 1-D right operand [k] is a column [k, 1], and that
//     unit dim is dropped from the result;
//   - the dims before the last two are batch dims and broadcast against each other.
// The kernel gets views with the broadcast batch shape (stride 0 where a dim was broadcast), so no
// operand is ever copied, transposed views included.
//
// On a GPU there are four GEMMs (MatmulBackend, kernels/cuda/gemm.h) and a tuner choosing among them;
// which runs is the one extra argument this op passes to its CUDA kernel. The CPU has one GEMM, in
// f32/f64: 16-bit operands are widened for it, while the GPU GEMMs read them directly.
//
// linear is here too: the same GEMM on [rows, in] @ [in, out] (W^T read through its strides) with a
// linear layer's bias and activation fused into its epilogue.
#include <algorithm>
#include <atomic>

#include "kernels/dispatch.h"

#if BRIGADE_HAVE_CUDA
#include "core/cuda/guard.h"
#include "kernels/cuda/gemm.h"
#endif

namespace brigade::ops {
namespace {

// x viewed with `batch` dims in front of its last two (aligned from the right, stride 0 where x has
// no such dim or size 1). Built with make_view: the op layer never records views on a tape.
Tensor expand_batch(const Tensor& x, const Shape& batch) {
  const int64_t batch_dims = int64_t(batch.size());
  const int64_t x_batch_dims = x.dim() - 2;
  Shape shape = batch;
  Strides strides(batch.size(), 0);
  for (int64_t d = 0; d < x_batch_dims; ++d) {
    const int64_t out_d = batch_dims - x_batch_dims + d;
    if (x.size(d) != 1) strides[size_t(out_d)] = x.stride(d);
  }
  shape.insert(shape.end(), {x.size(-2), x.size(-1)});
  strides.insert(strides.end(), {x.stride(-2), x.stride(-1)});
  return make_view(x, shape, strides, x.offset());
}

// Inserts a size-1 dim at `dim` (a view; no tape).
Tensor with_unit_dim(const Tensor& x, int64_t dim) {
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, 1);
  return make_view(x, shape, strides, x.offset());
}

// The batch dims of a and b (all but the last two) broadcast NumPy-style, or an error naming both
// full shapes.
Shape broadcast_batch(const Tensor& a, const Tensor& b, const Shape& a_shape, const Shape& b_shape) {
  const int64_t na = a.dim() - 2, nb = b.dim() - 2, n = std::max(na, nb);
  Shape batch(size_t(n), 1);
  for (int64_t i = 0; i < n; ++i) {  // i counts batch dims from the right
    const int64_t sa = i < na ? a.size(na - 1 - i) : 1, sb = i < nb ? b.size(nb - 1 - i) : 1;
    BRIGADE_CHECK(sa == sb || sa == 1 || sb == 1, "matmul: batch dims of shapes ", shape_str(a_shape), " and ",
                  shape_str(b_shape), " cannot be broadcast");
    batch[size_t(n - 1 - i)] = sa == 1 ? sb : sa;
  }
  return batch;
}

std::atomic<MatmulBackend> g_backend{MatmulBackend::automatic};
std::atomic<bool> g_allow_tf32{false};

// The dtypes each GPU GEMM has kernels for (see ops.h).
bool backend_takes(MatmulBackend backend, DType t) {
  switch (backend) {
    case MatmulBackend::tiled: return t == DType::f32 || is_half(t);
    case MatmulBackend::tensor_core:
    case MatmulBackend::hopper: return is_half(t);
    default: return true;  // cuBLAS: f32, f64, bf16, f16; tuned: cuBLAS at least
  }
}

// With linear_epilogue below, the dispatch whose CUDA side takes the GEMM backend: spelled out
// (kernels/dispatch.h says why).
void run_gemm(const Tensor& out, const Tensor& a, const Tensor& b, MatmulBackend backend) {
#if BRIGADE_HAVE_CUDA
  if (a.device().is_cuda()) return cuda::matmul(out, a, b, backend);
#endif
  (void)backend;  // the CPU has one GEMM
  check_cpu_backend("matmul", a);
  cpu::matmul(out, a, b);
}

// Checks a linear layer's operands, naming every shape involved.
void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined("linear", x, "input");
  check_defined("linear", weight, "weight");
  check_same_device("linear", x, weight);
  check_same_dtype("linear", x, weight);
  check_floating("linear", x);
  BRIGADE_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out, in], got shape ", shape_str(weight.shape()));
  BRIGADE_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input shape ", shape_str(x.shape()),
                " does not end in weight's in_features (weight shape ", shape_str(weight.shape()), ")");
  if (!bias.defined()) return;
  check_same_device("linear", x, bias);
  check_same_dtype("linear", x, bias);
  BRIGADE_CHECK(bias.shape() == Shape{weight.size(0)}, "linear: bias shape ", shape_str(bias.shape()),
                " should be [", weight.size(0), "] for weight shape ", shape_str(weight.shape()));
}

}  // namespace

const char* matmul_backend_name(MatmulBackend backend) {
  switch (backend) {
    case MatmulBackend::automatic: return "automatic";
    case MatmulBackend::cublas: return "cublas";
    case MatmulBackend::tiled: return "tiled";
    case MatmulBackend::tensor_core: return "tensor_core";
    case MatmulBackend::hopper: return "hopper";
    case MatmulBackend::tuned: return "tuned";
  }
  return "?";
}

bool matmul_backend_available(MatmulBackend backend, Device device) {
  if (device.is_cpu() || backend != MatmulBackend::hopper) return true;
#if BRIGADE_HAVE_CUDA
  if (!device.is_cuda() || device.index < 0 || device.index >= cuda::device_count()) return false;  // no such GPU
  cuda::DeviceGuard guard(device.index);
  return cuda::hopper_gemm_available();
#else
  return false;
#endif
}

#if !BRIGADE_HAVE_CUDA
// Without CUDA nothing is ever tuned (kernels/cuda/gemm_tuner.cpp has the real ones).
std::vector<MatmulTuning> matmul_tunings() { return {}; }
int64_t matmul_tuning_count() { return 0; }
void clear_matmul_tunings() {}
#endif

void set_matmul_backend(MatmulBackend backend) { g_backend.store(backend); }
MatmulBackend matmul_backend() { return g_backend.load(); }
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul(a, b, matmul_backend()); }

Tensor matmul(const Tensor& a, const Tensor& b, MatmulBackend backend) {
  check_defined("matmul", a, "a");
  check_defined("matmul", b, "b");
  check_same_device("matmul", a, b);
  check_same_dtype("matmul", a, b);
  check_floating("matmul", a);
  BRIGADE_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least one dim, got shapes ",
                shape_str(a.shape()), " and ", shape_str(b.shape()));
  BRIGADE_CHECK(a.size(-1) == b.size(b.dim() == 1 ? 0 : -2), "matmul: shapes ", shape_str(a.shape()), " and ",
                shape_str(b.shape()), " cannot be multiplied");
  if (a.device().is_cuda()) {
    BRIGADE_CHECK(backend_takes(backend, a.dtype()), "matmul: the ", matmul_backend_name(backend),
                  " backend has no kernel for ", dtype_name(a.dtype()), " (shapes ", shape_str(a.shape()), " and ",
                  shape_str(b.shape()), " on ", a.device().str(), ")");
  } else if (is_half(a.dtype())) {
    return to_dtype(matmul(to_dtype(a, DType::f32), to_dtype(b, DType::f32), backend), a.dtype());
  }

  const Tensor a2 = a.dim() == 1 ? with_unit_dim(a, 0) : a;  // [k] -> [1, k]
  const Tensor b2 = b.dim() == 1 ? with_unit_dim(b, 1) : b;  // [k] -> [k, 1]
  const Shape batch = broadcast_batch(a2, b2, a.shape(), b.shape());

  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {a2.size(-2), b2.size(-1)});
  Tensor out = empty(out_shape, a.dtype(), a.device());
  run_gemm(out, expand_batch(a2, batch), expand_batch(b2, batch), backend);

  // Drop the unit dims the 1-D operands brought in.
  Shape result_shape = batch;
  if (a.dim() > 1) result_shape.push_back(a2.size(-2));
  if (b.dim() > 1) result_shape.push_back(b2.size(-1));
  return result_shape == out_shape ? out : make_view(out, result_shape, contiguous_strides(result_shape), 0);
}

LinearOutput linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, bool keep_pre) {
  return linear(x, weight, bias, act, keep_pre, matmul_backend());
}

LinearOutput linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, bool keep_pre,
                    MatmulBackend backend) {
  check_linear(x, weight, bias);
  const int64_t in = weight.size(1), out = weight.size(0);
  Shape y_shape = x.shape();
  y_shape.back() = out;
  const Tensor wt = make_view(weight, {in, out}, {weight.stride(1), weight.stride(0)}, weight.offset());  // W^T
  // The CPU GEMM takes f32 and f64: 16-bit data runs the separate ops (each widening and narrowing),
  // which round where the fused epilogue would.
  if (x.device().is_cpu() && is_half(x.dtype())) {
    Tensor pre = matmul(x, wt, backend);
    if (bias.defined()) pre = binary(BinaryOp::add, pre, bias);
    if (act == Activation::none) return {pre, keep_pre ? pre : Tensor()};
    return {unary(UnaryOp::gelu, pre), keep_pre ? pre : Tensor()};
  }
  if (x.device().is_cuda())
    BRIGADE_CHECK(backend_takes(backend, x.dtype()), "linear: the ", matmul_backend_name(backend),
                  " backend has no kernel for ", dtype_name(x.dtype()), " (input ", shape_str(x.shape()), ", weight ",
                  shape_str(weight.shape()), " on ", x.device().str(), ")");

  // [..., in] as [rows, in]: a 2-D x is read through its strides; more dims are merged, which copies
  // an x that is not contiguous.
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const Tensor x_flat = x.dim() == 2 ? x : x.dim() == 1 ? with_unit_dim(x, 0) : [&] {
    const Tensor xc = contiguous(x);
    return make_view(xc, {rows, in}, {in, 1}, xc.offset());
  }();
  const Tensor bias_c = bias.defined() ? contiguous(bias) : bias;
  LinearOutput result;
  result.y = empty({x_flat.size(0), out}, x.dtype(), x.device());
  const bool separate_pre = keep_pre && act != Activation::none;
  if (separate_pre) result.pre = empty({x_flat.size(0), out}, x.dtype(), x.device());
#if BRIGADE_HAVE_CUDA
  if (x.device().is_cuda()) {
    cuda::linear_epilogue(result.y, result.pre, x_flat, wt, bias_c, act, backend);
  } else
#endif
  {
    check_cpu_backend("linear", x);
    cpu::linear_epilogue(result.y, result.pre, x_flat, wt, bias_c, act);
  }
  const Strides strides = contiguous_strides(y_shape);
  result.y = make_view(result.y, y_shape, strides, 0);
  if (separate_pre) result.pre = make_view(result.pre, y_shape, strides, 0);
  else if (keep_pre) result.pre = result.y;
  return result;
}

}  // namespace brigade::ops
