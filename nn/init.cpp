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

// The generator a random tensor draws from: init.gen() in construction order, or the tensor's own
// stream when drawing by name.
template <class Draw>
Tensor draw(const Init& init, Draw fn) {
  if (!init.name_seed) return fn(&init.gen());
  BRIGADE_CHECK(!init.path.empty(), "nn::init: drawing by name (Init::keyed) needs the parameter's name: build "
                "the layer with init.at(\"<its name>\")");
  Generator own = named_generator(*init.name_seed, init.path);
  return fn(&own);
}

}  // namespace

Tensor normal(const Shape& shape, double std, const Init& init) {
  BRIGADE_CHECK(std > 0, "init::normal: std must be positive, got ", std);
  Tensor t = draw(init, [&](Generator* gen) { return randn(shape, DType::f64, Device::cpu(), gen); });
  return finish(ops::scale_shift(t, std, 0.0), init);
}

Tensor uniform(const Shape& shape, double bound, const Init& init) {
  BRIGADE_CHECK(bound > 0, "init::uniform: bound must be positive, got ", bound);
  Tensor t = draw(init, [&](Generator* gen) {
    return brigade::uniform(shape, -bound, bound, DType::f64, Device::cpu(), gen);
  });
  return finish(t, init);
}

Tensor zeros(const Shape& shape, const Init& init) { return brigade::zeros(shape, init.dtype, init.device); }
Tensor ones(const Shape& shape, const Init& init) { return brigade::ones(shape, init.dtype, init.device); }

}  // namespace brigade::nn::init
