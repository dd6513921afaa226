#include "core/factory.h"

#include <cmath>

#include "kernels/ops.h"  // fill_ for any device: core uses two kernels, by design (docs/tensor.md)

namespace brigade {

Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  BRIGADE_CHECK(int64_t(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
                " values do not fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor out = empty(shape, dtype, Device::cpu());
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = from_double<T>(values[i]);
  });
  return device.is_cpu() ? out : out.to(device);
}

// Filled where it lives: on a GPU by a kernel on the current stream (no host buffer, no copy, no
// synchronisation — the autograd seeds its 1/M gradients and missing outputs' zeros this way on the
// hot path). The value is rounded to `dtype` exactly as from_vector rounds it.
Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor out = empty(shape, dtype, device);
  ops::fill_(out, value);
  return out;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }
Tensor scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  BRIGADE_CHECK(step != 0, "arange: step must be non-zero");
  double count = std::ceil((end - start) / step);
  int64_t n = count > 0 ? int64_t(count) : 0;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[size_t(i)] = start + double(i) * step;
  return from_vector(values, {n}, dtype, device);
}

Tensor arange(int64_t end, DType dtype, Device device) { return arange(0.0, double(end), 1.0, dtype, device); }

Shape Literal::shape() const {
  if (!is_list_) return {};
  Shape inner = items_.empty() ? Shape{} : items_.front().shape();
  for (size_t i = 1; i < items_.size(); ++i) {
    const Shape other = items_[i].shape();
    BRIGADE_CHECK(other == inner, "tensor: ragged literal: element ", i, " has shape ", shape_str(other),
                  " where element 0 has ", shape_str(inner), " (every list at one depth must have one shape)");
  }
  Shape shape = {int64_t(items_.size())};
  shape.insert(shape.end(), inner.begin(), inner.end());
  return shape;
}

void Literal::flatten(std::vector<double>& out) const {
  if (!is_list_) out.push_back(value_);
  for (const Literal& item : items_) item.flatten(out);
}

Tensor tensor(const Literal& values, DType dtype, Device device) {
  const Shape shape = values.shape();
  std::vector<double> flat;
  values.flatten(flat);
  return from_vector(flat, shape, dtype, device);
}

}  // namespace brigade
