// Tensor's view and copy methods, with their gradients.
//
// A view op only rewrites (shape, strides, offset); its backward maps the output gradient back to the
// input's geometry: reshape back, permute back, scatter a slice into zeros, sum a broadcast away.
#include <algorithm>
#include <numeric>
#include <optional>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/factory.h"
#include "core/stream.h"
#include "kernels/ops.h"

namespace brigade {
namespace {

// Records a single-input op whose backward is `back(grad_out)`.
template <class Back>
Tensor recorded(const char* name, const Tensor& x, Tensor out, Back back) {
  record(name, {x}, {out}, [back](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> {
    return {back(g[0])};
  });
  return out;
}

Shape infer_size(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      BRIGADE_CHECK(infer < 0, op, ": only one dimension can be -1 in ", shape_str(shape));
      infer = int64_t(i);
    } else {
      BRIGADE_CHECK(out[i] >= 0, op, ": invalid size in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    BRIGADE_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for ",
                  shape_str(from), " (", numel, " elements)");
    out[size_t(infer)] = numel / known;
  }
  BRIGADE_CHECK(shape_numel(out) == numel, op, ": shape ", shape_str(shape), " is invalid for ", shape_str(from), " (",
                numel, " elements)");
  return out;
}

// Ops that pick positions along a dim need one: a 0-dim tensor has none (wrap_dim accepts dim 0 of
// a scalar, which is right for reductions but not here).
void check_has_dims(const char* op, const Tensor& x) {
  BRIGADE_CHECK(x.dim() > 0, op, ": expected a tensor with at least one dimension, got a 0-dimensional tensor");
}

}  // namespace

namespace {

// Strides that show a tensor of (shape, strides) as `target` without moving bytes, if any exist.
// Walk the dims from the innermost, grouping runs of dims that are laid out back to back ("chunks":
// each dim's stride is the next one's stride times its size). A view can regroup the sizes inside a
// chunk freely but can't merge two chunks, so each chunk must be covered exactly by whole target dims.
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& target) {
  if (shape.empty() || shape_numel(shape) == 0) return contiguous_strides(target);
  Strides out(target.size());
  int64_t t = int64_t(target.size()) - 1;  // next target dim to assign, innermost first
  int64_t chunk_stride = strides.back();     // stride of the chunk's innermost dim
  int64_t chunk_numel = 1, covered = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    chunk_numel *= shape[size_t(d)];
    bool chunk_ends = d == 0 || (shape[size_t(d) - 1] != 1 && strides[size_t(d) - 1] != chunk_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (t >= 0 && (covered < chunk_numel || target[size_t(t)] == 1)) {
      out[size_t(t)] = covered * chunk_stride;
      covered *= target[size_t(t)];
      --t;
    }
    if (covered != chunk_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = strides[size_t(d) - 1];
      chunk_numel = covered = 1;
    }
  }
  if (t != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  Shape target = infer_size(shape, numel(), "view", this->shape());
  std::optional<Strides> st = view_strides(this->shape(), strides(), target);
  BRIGADE_CHECK(st.has_value(), "view: a tensor with shape ", shape_str(this->shape()), " and strides ",
                shape_str(strides()), " cannot be viewed as ", shape_str(target),
                " without copying; use reshape(), which copies");
  Shape from = this->shape();
  Tensor out = make_view(*this, target, *st, offset());
  return recorded("view", *this, out, [from](const Tensor& g) { return g.reshape(from); });
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape target = infer_size(shape, numel(), "reshape", this->shape());
  return view_strides(this->shape(), strides(), target) ? view(target) : contiguous().view(target);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  BRIGADE_CHECK(int64_t(dims.size()) == dim(), "permute: ", dims.size(), " dims given for a tensor with shape ",
                shape_str(shape()));
  Shape new_shape(dims.size());
  Strides new_strides(dims.size());
  std::vector<int64_t> inverse(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    BRIGADE_CHECK(inverse[size_t(d)] < 0, "permute: dim ", d, " repeated in ", shape_str(dims));
    inverse[size_t(d)] = int64_t(i);
    new_shape[i] = shape()[size_t(d)];
    new_strides[i] = strides()[size_t(d)];
  }
  Tensor out = make_view(*this, new_shape, new_strides, offset());
  return recorded("permute", *this, out, [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) {  // as in PyTorch, a scalar transposes to itself (after checking the dims)
    wrap_dim(d0, 0, "transpose");
    wrap_dim(d1, 0, "transpose");
    return *this;
  }
  std::vector<int64_t> dims(static_cast<size_t>(dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[size_t(wrap_dim(d0, dim(), "transpose"))], dims[size_t(wrap_dim(d1, dim(), "transpose"))]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_has_dims("slice", *this);
  d = wrap_dim(d, dim(), "slice");
  BRIGADE_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = shape()[size_t(d)];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape[size_t(d)] = (end - start + step - 1) / step;
  new_strides[size_t(d)] *= step;
  Tensor out = make_view(*this, new_shape, new_strides, offset() + start * strides()[size_t(d)]);
  Shape from = shape();
  DType dt = dtype();
  Device dev = device();
  return recorded("slice", *this, out, [=](const Tensor& g) {
    Tensor full_grad = zeros(from, dt, dev);
    ops::copy_(full_grad.slice(d, start, end, step), g);
    return full_grad;
  });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_has_dims("narrow", *this);
  d = wrap_dim(d, dim(), "narrow");
  BRIGADE_CHECK(start >= 0 && length >= 0 && start + length <= shape()[size_t(d)], "narrow: range [", start, ", ",
                start + length, ") is outside dim ", d, " of size ", shape()[size_t(d)]);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_has_dims("select", *this);
  d = wrap_dim(d, dim(), "select");
  int64_t n = shape()[size_t(d)];
  BRIGADE_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& target) const {
  BRIGADE_CHECK(target.size() >= shape().size(), "expand: cannot expand shape ", shape_str(shape()), " to ",
                shape_str(target), " (fewer dimensions)");
  size_t lead = target.size() - shape().size();
  Shape new_shape(target.size());
  Strides new_strides(target.size(), 0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      BRIGADE_CHECK(target[i] >= 0, "expand: size -1 is not allowed for new leading dim ", i);
      new_shape[i] = target[i];
      continue;
    }
    int64_t have = shape()[i - lead];
    int64_t want = target[i] == -1 ? have : target[i];
    BRIGADE_CHECK(want >= 0 && (have == want || have == 1), "expand: shape ", shape_str(shape()), " cannot be expanded to ",
                  shape_str(target));
    new_shape[i] = want;
    new_strides[i] = have == want ? strides()[i - lead] : 0;
  }
  Tensor out = make_view(*this, new_shape, new_strides, offset());
  Shape from = shape();
  return recorded("expand", *this, out, [from](const Tensor& g) { return ops::sum_to(g, from); });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  // As in PyTorch: only size-1 dims are removed, and a scalar stays itself.
  if (dim() == 0 || shape()[size_t(d)] != 1) return *this;
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape.erase(new_shape.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  Tensor out = make_view(*this, new_shape, new_strides, offset());
  return recorded("squeeze", *this, out, [d](const Tensor& g) { return g.unsqueeze(d); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  BRIGADE_CHECK(d >= -(dim() + 1) && d <= dim(), "unsqueeze: dim ", d, " is out of range for a tensor with ", dim(),
                " dimensions");
  if (d < 0) d += dim() + 1;
  Shape new_shape = shape();
  Strides new_strides = strides();
  int64_t stride_here = d < dim() ? strides()[size_t(d)] * shape()[size_t(d)] : 1;
  new_shape.insert(new_shape.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, stride_here);
  Tensor out = make_view(*this, new_shape, new_strides, offset());
  return recorded("unsqueeze", *this, out, [d](const Tensor& g) { return g.squeeze(d); });
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = ops::clone(*this);
  return recorded("clone", *this, out, [](const Tensor& g) { return g; });
}

// The method spelling of brigade::to_dtype (autograd/functions/cast.cpp): one conversion, written once.
Tensor Tensor::to(DType t) const { return to_dtype(*this, t); }

namespace {

// Integer tensors up to this size keep a host copy when sent to a GPU (Storage::host_mirror): token
// ids and targets, which index scans then read on the host. Larger ones are not worth the memory.
constexpr size_t kMirroredBytes = size_t(16) << 20;

// A contiguous copy of x on `device`. The new storage is allocated with that device current (a GPU
// allocation goes to the current CUDA device); ops::copy_ does the transfer.
Tensor copy_to_device(const Tensor& x, Device device) {
  std::optional<StreamGuard> on_device;
  if (device.is_cuda()) on_device.emplace(current_stream(device));
  Tensor out = empty(x.shape(), x.dtype(), device);
  if (device.is_cuda() && !is_floating(x.dtype()) && x.nbytes() <= kMirroredBytes) {
    // A private snapshot: the caller may change x after this returns, the GPU copy keeps these values.
    // From another GPU, the source's own host copy serves, when it keeps one.
    Tensor from_host = x.device().is_cpu() ? x : x.host_mirror();
    if (from_host.defined()) {
      Tensor snapshot = ops::clone(from_host);
      ops::copy_(out, x.device().is_cpu() ? snapshot : x);
      out.storage().set_host_mirror(snapshot.storage());
      return out;
    }
  }
  ops::copy_(out, x);
  return out;
}

}  // namespace

// Differentiable: the gradient travels back to the device the input came from.
Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  BRIGADE_CHECK(d.is_cpu() || (d.index >= 0 && d.index < cuda_device_count()), "to: cannot copy a tensor to ",
                d.str(), ": ",
#if BRIGADE_HAVE_CUDA
                "this machine has ", cuda_device_count(), cuda_device_count() == 1 ? " GPU" : " GPUs",
                cuda_device_count() == 0 ? " (or no CUDA driver)" : ""
#else
                "brigade was built without CUDA"
#endif
  );
  Tensor out = copy_to_device(*this, d);
  if (!is_floating(dtype())) return out;  // integers carry no gradient
  Device from = device();
  return recorded("to", *this, out, [from](const Tensor& g) { return copy_to_device(g, from); });
}

}  // namespace brigade
