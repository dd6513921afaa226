// Tensor: a view of a Storage — shared bytes + offset + shape + strides + dtype.
//
//   element (i0, i1, ..., ik) lives at  storage.data + (offset + Σ ij * strides[j]) * dtype_size
//
// So transposing swaps two strides, slicing moves the offset and shrinks a size, broadcasting sets a
// stride to 0 — no bytes move. `contiguous()` is the one place that copies a view into row-major order.
//
// A Tensor is a cheap handle (one shared_ptr): copying it shares the same data, like LibTorch.
// Autograd state lives here too (requires_grad, grad, is_leaf); the Tape in autograd/ does the rest.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace brigade {

struct TensorImpl {
  Storage storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Strides strides;
  DType dtype = DType::f32;

  // Autograd. A leaf is a tensor no recorded op produced (parameters, inputs); the tape accumulates
  // gradients into leaves that require grad. `id` identifies this tensor in a tape's bookkeeping.
  bool requires_grad = false;
  bool is_leaf = true;
  std::shared_ptr<TensorImpl> grad;
  uint64_t id = 0;

  TensorImpl();
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor: defined() is false, everything else throws
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t offset() const { return impl().offset; }
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage.device(); }
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  bool is_contiguous() const;
  const Storage& storage() const { return impl().storage; }
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same_as(const Tensor& o) const { return impl_ == o.impl_; }

  // Pointer to element 0 of this view. data<T>() checks that T matches the dtype.
  void* raw_data() const;
  template <class T> T* data() const {
    BRIGADE_CHECK(dtype_of<T>() == dtype(), "data<", dtype_name(dtype_of<T>()), ">(): tensor has dtype ",
                  dtype_name(dtype()));
    return static_cast<T*>(raw_data());
  }

  // ---- views (no copy; differentiable) ----
  Tensor view(const Shape& shape) const;     // needs compatible strides; one size may be -1
  Tensor reshape(const Shape& shape) const;  // view when possible, else copies
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;  // python-style bounds
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`
  Tensor expand(const Shape& shape) const;           // broadcast size-1 dims (stride 0); -1 keeps a size
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten() const { return reshape({numel()}); }

  // ---- copies (differentiable) ----
  Tensor contiguous() const;  // returns *this when already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;  // to_dtype(*this, dtype): the one dtype conversion, differentiable
  Tensor to(Device device) const;

  // ---- values ----
  double item() const;                         // a one-element tensor's value
  double at(const std::vector<int64_t>& index) const;  // one element, for tests and printing
  std::vector<double> to_vector() const;       // all elements in row-major order, as f64
  std::string str() const;                     // shape, dtype, device and (truncated) values
  // This view over a host copy of the storage's bytes, when it keeps a valid one (Storage::
  // host_mirror: small integer tensors sent from the host); undefined otherwise. Reads no GPU memory.
  Tensor host_mirror() const;

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool on = true);  // only on leaves
  bool is_leaf() const { return impl().is_leaf; }
  Tensor grad() const;                     // undefined until a backward pass reaches this leaf
  void set_grad(const Tensor& g);
  void zero_grad();                        // drops the gradient
  Tensor detach() const;                   // same data, cut from the tape, requires_grad false

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Builds a view of `base`'s storage with the given geometry — the raw mechanism under every view op.
// Not recorded on any tape; checks that the view stays inside the storage.
Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset);

// An uninitialised contiguous tensor.
Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());

}  // namespace brigade
