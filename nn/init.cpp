#include "nn/init.h"

#include "autograd/tape.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::nn::init {
namespace {

// Random values are made in f64 on the host, then rounded and moved: the same numbers everywhere.
Tensor finish(const Tensor& host_f64, const Init& init) {
  NoGradGuard no_grad;
  Tensor t = ops::to_dtype(host_f64, init.dtype);
  return init.device == Device::cpu() ? t : t.to(init.device);
}

}  // namespace

Tensor normal(const Shape& shape, double std, const Init& init) {
  BRIGADE_CHECK(std > 0, "init::normal: std must be positive, got ", std);
  Tensor t = randn(shape, DType::f64, Device::cpu(), &init.gen());
  return finish(ops::scale_shift(t, std, 0.0), init);
}

Tensor uniform(const Shape& shape, double bound, const Init& init) {
  BRIGADE_CHECK(bound > 0, "init::uniform: bound must be positive, got ", bound);
  return finish(brigade::uniform(shape, -bound, bound, DType::f64, Device::cpu(), &init.gen()), init);
}

Tensor zeros(const Shape& shape, const Init& init) { return brigade::zeros(shape, init.dtype, init.device); }
Tensor ones(const Shape& shape, const Init& init) { return brigade::ones(shape, init.dtype, init.device); }

}  // namespace brigade::nn::init
