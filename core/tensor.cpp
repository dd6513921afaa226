// Tensor's bookkeeping: identity, shape and stride queries, printing. Its view and copy methods
// (view, reshape, permute, transpose, slice, narrow, select, expand, squeeze, unsqueeze, contiguous,
// clone, to) are defined in autograd/functions/views.cpp: each records itself on the tape, so a
// gradient flows through it, and core/ sits below autograd/.
#include "core/tensor.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

namespace brigade {

TensorImpl::TensorImpl() {
  static std::atomic<uint64_t> next_id{1};
  id = next_id.fetch_add(1, std::memory_order_relaxed);
}

TensorImpl& Tensor::impl() const {
  BRIGADE_CHECK(impl_ != nullptr, "use of an undefined tensor");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return shape()[size_t(wrap_dim(d, dim(), "size"))]; }
int64_t Tensor::stride(int64_t d) const { return strides()[size_t(wrap_dim(d, dim(), "stride"))]; }

bool Tensor::is_contiguous() const {
  // Size-1 dimensions may have any stride; empty tensors are trivially contiguous.
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 0) return true;
    if (shape()[i] != 1 && strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage.data()) + impl().offset * int64_t(element_size());
}

Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset) {
  BRIGADE_CHECK(shape.size() == strides.size(), "make_view: shape ", shape_str(shape), " and strides ",
                shape_str(strides), " differ in length");
  // Bounds: the lowest and highest element the view can touch must lie inside the storage.
  int64_t lo = offset, hi = offset;
  bool empty_view = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    BRIGADE_CHECK(shape[i] >= 0, "make_view: negative size in shape ", shape_str(shape));
    if (shape[i] == 0) empty_view = true;
    int64_t reach = 0;
    bool overflow = shape[i] > 0 && __builtin_mul_overflow(shape[i] - 1, strides[i], &reach);
    overflow = overflow || __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
    BRIGADE_CHECK(!overflow, "make_view: shape ", shape_str(shape), " with strides ", shape_str(strides),
                  " overflows 64-bit offsets");
  }
  int64_t capacity = int64_t(base.storage().nbytes() / base.element_size());
  BRIGADE_CHECK(empty_view || (lo >= 0 && hi < capacity), "make_view: view with shape ", shape_str(shape),
                ", strides ", shape_str(strides), " and offset ", offset, " reaches outside a storage of ",
                capacity, " elements");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Tensor empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    BRIGADE_CHECK(d >= 0, "empty: negative size in shape ", shape_str(shape));
  size_t nbytes = 0;
  BRIGADE_CHECK(!__builtin_mul_overflow(size_t(shape_numel(shape)), dtype_size(dtype), &nbytes), "empty: shape ",
                shape_str(shape), " of ", dtype_name(dtype), " needs more bytes than fit in 64 bits");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage(nbytes, device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// ---- values ----

namespace {

// Values of a GPU tensor are read from a host copy: one transfer (which waits for the GPU to finish
// the tensor), then the CPU path. `detach` keeps the copy off any tape.
Tensor on_host(const Tensor& t) { return t.device().is_cpu() ? t : t.detach().to(Device::cpu()); }

double read_element(const Tensor& t, int64_t element_offset) {
  const char* base = static_cast<const char*>(t.storage().data()) + element_offset * int64_t(t.element_size());
  return visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return to_double(*reinterpret_cast<const T*>(base));
  });
}

}  // namespace

double Tensor::item() const {
  BRIGADE_CHECK(numel() == 1, "item: tensor with shape ", shape_str(shape()), " has ", numel(),
                " elements, expected exactly one");
  const Tensor host = on_host(*this);
  return read_element(host, host.offset());
}

double Tensor::at(const std::vector<int64_t>& index) const {
  BRIGADE_CHECK(int64_t(index.size()) == dim(), "at: index ", shape_str(index), " does not fit shape ",
                shape_str(shape()));
  int64_t off = offset();
  for (size_t i = 0; i < index.size(); ++i) {
    BRIGADE_CHECK(index[i] >= 0 && index[i] < shape()[i], "at: index ", shape_str(index),
                  " is out of bounds for shape ", shape_str(shape()));
    off += index[i] * strides()[i];
  }
  if (!device().is_cpu()) return make_view(*this, {}, {}, off).item();  // copies just that element
  return read_element(*this, off);
}

Tensor Tensor::host_mirror() const {
  Storage host = storage().host_mirror();
  if (!host.defined()) return Tensor();
  auto view = std::make_shared<TensorImpl>();
  view->storage = host;
  view->offset = offset();
  view->shape = shape();
  view->strides = strides();
  view->dtype = dtype();
  return Tensor(view);
}

std::vector<double> Tensor::to_vector() const {
  if (!device().is_cpu()) return on_host(*this).to_vector();
  std::vector<double> out;
  out.reserve(size_t(numel()));
  std::vector<int64_t> idx(size_t(dim()), 0);
  for (int64_t n = 0; n < numel(); ++n) {
    int64_t off = offset();
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides()[i];
    out.push_back(read_element(*this, off));
    for (size_t i = idx.size(); i-- > 0;) {  // odometer increment, last dim fastest
      if (++idx[i] < shape()[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype()) << ", device=" << device().str();
  if (requires_grad()) os << ", requires_grad";
  os << ")";
  // Values: the last dimension as rows of a table, at most 6 rows x 8 columns, with "..." elided.
  const int64_t kMaxRows = 6, kMaxCols = 8;
  std::vector<double> v = to_vector();
  int64_t cols = dim() == 0 ? 1 : shape().back();
  int64_t rows = cols == 0 ? 0 : numel() / cols;
  auto fmt = [&](double x) {
    char buf[32];
    if (is_integral(dtype())) std::snprintf(buf, sizeof buf, "%lld", (long long)x);
    else std::snprintf(buf, sizeof buf, "%.4g", x);
    return std::string(buf);
  };
  for (int64_t r = 0; r < rows; ++r) {
    if (rows > kMaxRows && r == kMaxRows / 2) {
      os << "\n  ...";
      r = rows - kMaxRows / 2;
    }
    os << "\n  [";
    for (int64_t c = 0; c < cols; ++c) {
      if (cols > kMaxCols && c == kMaxCols / 2) {
        os << ", ...";
        c = cols - kMaxCols / 2;
      }
      os << (c ? ", " : "") << fmt(v[size_t(r * cols + c)]);
    }
    os << "]";
  }
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// ---- autograd state ----

Tensor& Tensor::requires_grad_(bool on) {
  BRIGADE_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad (this one was produced by a recorded op; use detach())");
  BRIGADE_CHECK(!on || is_floating(dtype()), "requires_grad_: only floating-point tensors can require grad, got ",
                dtype_name(dtype()));
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }

void Tensor::set_grad(const Tensor& g) {
  if (g.defined()) {
    BRIGADE_CHECK(g.shape() == shape(), "set_grad: gradient shape ", shape_str(g.shape()), " differs from tensor shape ",
                  shape_str(shape()));
    BRIGADE_CHECK(g.dtype() == dtype() && g.device() == device(), "set_grad: gradient is ", dtype_name(g.dtype()),
                  " on ", g.device().str(), " but the tensor is ", dtype_name(dtype()), " on ", device().str());
  }
  impl().grad = g.impl_ptr();
}

void Tensor::zero_grad() { impl().grad.reset(); }

Tensor Tensor::detach() const {
  Tensor out = make_view(*this, shape(), strides(), offset());
  return out;
}

}  // namespace brigade
