// ops: fused attention, forward and backward (the kernels: kernels/cpu/attention.cpp and
// kernels/cuda/attention.cu). This layer checks shapes, resolves the scale and lays out the outputs.
#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

// The largest head dim the CUDA kernels hold in registers and shared memory.
constexpr int64_t kMaxCudaHeadDim = 256;

// The CPU reference computes bf16/f16 in f32 copies; CUDA kernels take them directly.
DType kernel_dtype(const Tensor& t) { return t.device().is_cpu() && is_half(t.dtype()) ? DType::f32 : t.dtype(); }

// lse and the other statistics keep the accumulation dtype: f64 for f64, f32 otherwise.
DType stat_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace

void check_attention_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionParams& p) {
  check_defined(op, q, "q");
  check_defined(op, k, "k");
  check_defined(op, v, "v");
  check_same_device(op, q, k);
  check_same_device(op, q, v);
  check_floating(op, q);
  check_same_dtype(op, q, k);
  check_same_dtype(op, q, v);
  const auto shapes = [&] {
    return "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape());
  };
  BRIGADE_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
                ": expected q [B, H, Tq, D] and k, v [B, H, Tk, D], got ", shapes());
  BRIGADE_CHECK(k.shape() == v.shape(), op, ": k and v must have the same shape, got ", shapes());
  BRIGADE_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), op,
                ": q and k must agree on batch, heads and head dim, got ", shapes());
  BRIGADE_CHECK(q.size(3) > 0, op, ": the head dim must be positive, got ", shapes());
  BRIGADE_CHECK(!p.causal || q.size(2) <= k.size(2), op,
                ": causal attention needs no more queries than keys (the queries are the last Tq positions), got ",
                shapes());
  BRIGADE_CHECK(p.dropout >= 0.0 && p.dropout < 1.0, op, ": dropout must be in [0, 1), got ", p.dropout);
  BRIGADE_CHECK(std::isfinite(p.scale), op, ": scale must be finite, got ", p.scale);
  BRIGADE_CHECK(!q.device().is_cuda() || q.size(3) <= kMaxCudaHeadDim, op, ": head dim ", q.size(3),
                " exceeds the CUDA kernels' ", kMaxCudaHeadDim, " (", shapes(), ")");
}

namespace {

// The kernels read rows of d contiguous values: a view whose last dim is strided is copied first.
Tensor unit_last_stride(const Tensor& x) { return x.stride(3) == 1 ? x : contiguous(x); }

AttentionParams resolved(const AttentionParams& p, int64_t head_dim) {
  AttentionParams r = p;
  if (r.scale == 0) r.scale = 1.0 / std::sqrt(double(head_dim));
  return r;
}

// [B, H, T, D] stored as [B, T, H, D]: the layout in which the heads merge back without a copy.
Tensor heads_interleaved(int64_t B, int64_t H, int64_t T, int64_t D, DType dtype, Device device) {
  const Tensor storage = empty({B, T, H, D}, dtype, device);
  return make_view(storage, {B, H, T, D}, {T * H * D, D, H * D, 1}, storage.offset());
}

}  // namespace

AttentionOutput attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p) {
  const char* op = "attention";
  check_attention_inputs(op, q, k, v, p);
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  const AttentionParams r = resolved(p, D);
  const DType t = kernel_dtype(q);
  AttentionOutput out;
  out.y = heads_interleaved(B, H, Tq, D, q.dtype(), q.device());
  out.lse = empty({B, H, Tq}, stat_dtype(t), q.device());
  const auto in = [&](const Tensor& x) { return unit_last_stride(x.dtype() == t ? x : to_dtype(x, t)); };
  if (k.size(2) == 0) {  // no keys (only without the causal mask): an empty sum, as matmul gives
    fill_(out.y, 0);
    fill_(out.lse, -std::numeric_limits<double>::infinity());
    return out;
  }
  if (t == q.dtype()) {
    if (out.y.numel() > 0) BRIGADE_DISPATCH(op, q, attention_forward(out.y, out.lse, in(q), in(k), in(v), r));
    return out;
  }
  const Tensor y = heads_interleaved(B, H, Tq, D, t, q.device());
  if (y.numel() > 0) BRIGADE_DISPATCH(op, q, attention_forward(y, out.lse, in(q), in(k), in(v), r));
  copy_(out.y, y);
  return out;
}

AttentionGrads attention_backward(const Tensor& grad_y, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionOutput& saved, const AttentionParams& p) {
  const char* op = "attention_backward";
  check_attention_inputs(op, q, k, v, p);
  check_defined(op, grad_y, "grad_y");
  check_defined(op, saved.y, "saved output");
  check_defined(op, saved.lse, "saved log-sum-exp");
  check_same_device(op, q, grad_y);
  BRIGADE_CHECK(grad_y.shape() == q.shape() && saved.y.shape() == q.shape() &&
                    saved.lse.shape() == Shape({q.size(0), q.size(1), q.size(2)}),
                op, ": expected grad_y and y shaped like q ", shape_str(q.shape()), " and lse [B, H, Tq], got grad_y ",
                shape_str(grad_y.shape()), ", y ", shape_str(saved.y.shape()), ", lse ", shape_str(saved.lse.shape()));
  const AttentionParams r = resolved(p, q.size(3));
  const DType t = kernel_dtype(q);
  BRIGADE_CHECK(saved.lse.dtype() == stat_dtype(t) && saved.lse.is_contiguous(), op, ": the saved lse must be ",
                dtype_name(stat_dtype(t)), " and contiguous, got ", dtype_name(saved.lse.dtype()));
  const auto in = [&](const Tensor& x) { return unit_last_stride(x.dtype() == t ? x : to_dtype(x, t)); };
  AttentionGrads g{empty(q.shape(), t, q.device()), empty(k.shape(), t, q.device()), empty(v.shape(), t, q.device())};
  if (q.numel() > 0 && k.numel() > 0) {
    BRIGADE_DISPATCH(op, q, attention_backward(g.q, g.k, g.v, in(grad_y), in(q), in(k), in(v), in(saved.y),
                                               saved.lse, r));
  } else {  // no queries or no keys: nothing flows anywhere
    fill_(g.q, 0);
    fill_(g.k, 0);
    fill_(g.v, 0);
  }
  if (t != q.dtype()) g = {to_dtype(g.q, q.dtype()), to_dtype(g.k, q.dtype()), to_dtype(g.v, q.dtype())};
  return g;
}

}  // namespace brigade::ops
