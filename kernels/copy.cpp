// ops: copy_, fill_, contiguous, clone, to_dtype — and copies between devices.
#include <optional>

#include "core/stream.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

#if BRIGADE_HAVE_CUDA
#include "core/cuda/transfer.h"
#endif

namespace brigade::ops {
namespace {

#if BRIGADE_HAVE_CUDA

// Runs fn() with `device` as the current CUDA device of this thread (its current stream unchanged).
template <class Fn>
auto on_device(Device device, Fn&& fn) {
  std::optional<StreamGuard> guard;
  if (device.is_cuda()) guard.emplace(current_stream(device));
  return fn();
}

// Whether `src` can be moved into `dst` as raw bytes: same dtype, same shape, both contiguous.
bool same_bytes_layout(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.shape() == src.shape() && dst.is_contiguous() && src.is_contiguous();
}

// dst = src for tensors on different devices. Only contiguous bytes travel between devices; any
// reshaping — gathering a strided view, broadcasting, converting the dtype — is done by the copy
// kernel of one side, on a contiguous temporary:
//
//   src (any view) --contiguous() on src's device--> bytes --transfer--> temporary on dst's device
//                                                                    --copy_ (kernel)--> dst (any view)
//
// Broadcasting and dtype conversion happen on the destination side, so only src.numel() elements of
// src's dtype cross the bus.
void copy_across_devices(const Tensor& dst, const Tensor& src) {
  // A GPU allocation goes to the current CUDA device (Allocator::allocate has no device argument),
  // so each side's temporary is made with that side's device current.
  const Tensor packed = on_device(src.device(), [&] { return contiguous(src); });
  if (same_bytes_layout(dst, packed)) {
    cuda::copy_bytes(dst.raw_data(), dst.device(), packed.raw_data(), packed.device(), packed.nbytes());
    return;
  }
  on_device(dst.device(), [&] {
    const Tensor arrived = empty(packed.shape(), packed.dtype(), dst.device());
    cuda::copy_bytes(arrived.raw_data(), arrived.device(), packed.raw_data(), packed.device(), packed.nbytes());
    copy_(dst, arrived);
    return 0;
  });
}

#else

void copy_across_devices(const Tensor& dst, const Tensor& src) {
  fail("copy_: cannot copy from ", src.device().str(), " to ", dst.device().str(),
       ": brigade was built without CUDA");
}

#endif

}  // namespace

void copy_(const Tensor& dst, const Tensor& src) {
  check_defined("copy_", dst, "destination");
  check_defined("copy_", src, "source");
  Shape b = broadcast_shapes(dst.shape(), src.shape(), "copy_");
  BRIGADE_CHECK(b == dst.shape(), "copy_: source shape ", shape_str(src.shape()),
                " does not broadcast to destination shape ", shape_str(dst.shape()));
  check_no_self_overlap("copy_", dst);
  if (dst.device() != src.device()) {
    copy_across_devices(dst, src);
    dst.storage().bump_version();
    return;
  }
  if (may_overlap(dst, src)) return copy_(dst, clone(src));  // e.g. shifting a tensor by one
  BRIGADE_DISPATCH("copy_", dst, copy(dst, src));
  dst.storage().bump_version();
}

void fill_(const Tensor& dst, double value) {
  check_defined("fill_", dst, "destination");
  BRIGADE_DISPATCH("fill_", dst, fill(dst, value));
  dst.storage().bump_version();
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor clone(const Tensor& x) {
  check_defined("clone", x, "input");
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  copy_(out, x);
  return out;
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined("to", x, "input");
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.shape(), dtype, x.device());
  copy_(out, x);
  return out;
}

}  // namespace brigade::ops
