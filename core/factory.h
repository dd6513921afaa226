// Tensor factories: filled, ranged and from host values. (Random ones are in core/rng.h.)
// Tensors for other devices are built on the host and copied over.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace brigade {

Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());  // shape []

// [start, start + step, ...) below `end` (above it for a negative step).
Tensor arange(double start, double end, double step = 1, DType dtype = DType::i64, Device device = Device::cpu());
Tensor arange(int64_t end, DType dtype = DType::i64, Device device = Device::cpu());

// From host values in row-major order; `shape` must hold exactly values.size() elements.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f32,
                   Device device = Device::cpu());
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, DType dtype, Device device = Device::cpu()) {
  return from_vector(std::vector<double>(values.begin(), values.end()), shape, dtype, device);
}
// A tensor literal of any rank: a number, or a braced list of literals that all have one shape.
// Built implicitly from the braces: tensor({1, 2, 3}), tensor({{1.5}, {-2.0}, {0.5}}) (a column),
// tensor({{{1, 2}}, {{3, 4}}}) (2 x 1 x 2).
class Literal {
 public:
  Literal(double value) : value_(value) {}  // NOLINT: implicit on purpose, it is what makes the braces work
  Literal(std::initializer_list<Literal> items) : items_(items), is_list_(true) {}  // NOLINT

  // The shape the braces describe; throws naming the first place where sibling lists differ.
  Shape shape() const;
  void flatten(std::vector<double>& out) const;  // the numbers, row-major

 private:
  double value_ = 0;
  std::vector<Literal> items_;
  bool is_list_ = false;
};

// From a literal: tensor({1, 2, 3}) and tensor({{1, 2}, {3, 4}}); a bare number gives a 0-d tensor.
Tensor tensor(const Literal& values, DType dtype = DType::f32, Device device = Device::cpu());

}  // namespace brigade
