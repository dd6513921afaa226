// ops: rotary position embedding — its frequencies, the cos/sin table, and the rotation both ways.
//
// The table is made on the host in f64 and rounded once to the compute dtype, then read by both
// backends. Why f64: an angle is position * inv_freq, and in f32 its absolute error grows with the
// position (up to 4e-3 radians near position 100k: half the f32 spacing there), so f32 tables would
// turn late tokens by visibly wrong angles; in f64 the only error left is the final rounding of cos
// and sin, the same at every position. And one table for both devices means the CPU reference and a
// CUDA kernel use identical cos and sin (device sin/cos differ from the host's in the last bits).
#include <cmath>
#include <numbers>

#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace brigade::ops {
namespace {

// The dtype cos, sin and the arithmetic have for inputs of dtype t.
DType compute_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

void check_rope(const char* op, const Tensor& x, const RopeTable& table) {
  check_defined(op, x, "input");
  check_floating(op, x);
  BRIGADE_CHECK(x.dim() == 4 && x.size(3) % 2 == 0, op, ": expected input [B, H, T, D] with D even, got ",
                shape_str(x.shape()));
  check_defined(op, table.cos, "cos table");
  check_defined(op, table.sin, "sin table");
  const Shape want{x.size(2), x.size(3) / 2};
  const DType t = compute_dtype(x.dtype());
  for (const Tensor* part : {&table.cos, &table.sin}) {
    BRIGADE_CHECK(part->shape() == want && part->dtype() == t && part->device() == x.device(), op,
                  ": the table for input ", shape_str(x.shape()), " ", dtype_name(x.dtype()), " on ", x.device().str(),
                  " must be ", dtype_name(t), " ", shape_str(want), " on ", x.device().str(), ", got ",
                  dtype_name(part->dtype()), " ", shape_str(part->shape()), " on ", part->device().str());
  }
}

Tensor rotate(const char* op, const Tensor& x, const RopeTable& table, bool inverse) {
  check_rope(op, x, table);
  // The CPU reference computes 16-bit data in f32 (and rounds the result back); CUDA reads it as is.
  const bool widen = x.device().is_cpu() && is_half(x.dtype());
  const Tensor xk = widen ? to_dtype(x, DType::f32) : x;
  Tensor y = empty(x.shape(), xk.dtype(), x.device());
  const Tensor cos = contiguous(table.cos), sin = contiguous(table.sin);
  BRIGADE_DISPATCH(op, x, rope(y, xk, cos, sin, inverse));
  return widen ? to_dtype(y, x.dtype()) : y;
}

}  // namespace

std::vector<double> rope_frequencies(int64_t head_dim, const RopeParams& p) {
  BRIGADE_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim must be positive and even, got ", head_dim);
  BRIGADE_CHECK(p.theta > 1, "rope: theta must be greater than 1, got ", p.theta);
  std::vector<double> inv_freq(size_t(head_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(p.theta, -2.0 * double(i) / double(head_dim));
  if (!p.llama3) return inv_freq;
  const RopeLlama3Scaling& s = *p.llama3;
  BRIGADE_CHECK(s.factor > 0 && s.original_max_position_embeddings > 0 && s.low_freq_factor > 0 &&
                    s.low_freq_factor < s.high_freq_factor,
                "rope: llama3 scaling needs factor > 0, original_max_position_embeddings > 0 and 0 < "
                "low_freq_factor < high_freq_factor, got factor=",
                s.factor, ", original_max_position_embeddings=", s.original_max_position_embeddings,
                ", low_freq_factor=", s.low_freq_factor, ", high_freq_factor=", s.high_freq_factor);
  // Pairs that turn slowly (long wavelengths) carry the coarse position; stretching them by `factor`
  // extends the context the model was trained on. Fast pairs (local order) are left alone.
  const double long_wavelength = s.original_max_position_embeddings / s.low_freq_factor;
  const double short_wavelength = s.original_max_position_embeddings / s.high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelength = 2 * std::numbers::pi / f;
    if (wavelength < short_wavelength) continue;
    if (wavelength > long_wavelength) {
      f /= s.factor;
      continue;
    }
    const double smooth = (s.original_max_position_embeddings / wavelength - s.low_freq_factor) /
                          (s.high_freq_factor - s.low_freq_factor);
    f = (1 - smooth) * f / s.factor + smooth * f;
  }
  return inv_freq;
}

RopeTable rope_table(int64_t head_dim, int64_t start, int64_t count, const RopeParams& p, DType dtype,
                     Device device) {
  BRIGADE_CHECK(start >= 0 && count >= 0, "rope_table: positions [", start, ", ", start + count,
                ") must not be negative");
  BRIGADE_CHECK(dtype == DType::f32 || dtype == DType::f64, "rope_table: the table's dtype must be f32 or f64, got ",
                dtype_name(dtype));
  const std::vector<double> inv_freq = rope_frequencies(head_dim, p);
  const int64_t half = head_dim / 2;
  Tensor cos = empty({count, half}, DType::f64), sin = empty({count, half}, DType::f64);
  double* c = cos.data<double>();
  double* s = sin.data<double>();
  for (int64_t t = 0; t < count; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(start + t) * inv_freq[size_t(i)];
      c[t * half + i] = std::cos(angle);
      s[t * half + i] = std::sin(angle);
    }
  RopeTable table{empty({count, half}, dtype, device), empty({count, half}, dtype, device)};
  copy_(table.cos, cos);  // rounds to dtype, then moves to the device
  copy_(table.sin, sin);
  return table;
}

Tensor rope(const Tensor& x, const RopeTable& table) { return rotate("rope", x, table, false); }

Tensor rope_backward(const Tensor& grad_y, const RopeTable& table) {
  return rotate("rope_backward", grad_y, table, true);
}

}  // namespace brigade::ops
