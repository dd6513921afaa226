// How layers create their parameters: dtype, device, and where the random numbers come from.
//
// Every layer constructor takes an `Init`. Random values are drawn on the host from a Philox
// Generator and then copied to the target device, so a given (seed, construction order) produces the
// same weights — bit for bit after rounding to the dtype — on every device and in every dtype:
//
//   Generator gen(42);
//   auto fc = std::make_shared<nn::Linear>(64, 10, true, nn::Init{.generator = &gen});
//
// Without a generator, layers draw from default_generator() (see manual_seed).
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace brigade::nn {

struct Init {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  Generator* generator = nullptr;  // null: default_generator()
  // > 0: weight matrices are drawn from N(0, std), GPT-2 style. 0: each layer's own default
  // (Linear and Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); Embedding: N(0, 1)).
  double std = 0;
  // > 0: the std for projections that write into a residual stream (attention and MLP outputs).
  // GPT-2 scales it by 1/sqrt(2 * n_layer) so the residual's variance doesn't grow with depth.
  double residual_std = 0;

  Generator& gen() const { return generator != nullptr ? *generator : default_generator(); }
  // This Init with std replaced by residual_std (when set): what output projections use.
  Init residual() const {
    Init out = *this;
    if (residual_std > 0) out.std = residual_std;
    return out;
  }
};

namespace init {

// Fresh tensors of init.dtype on init.device. Random ones consume shape_numel(shape) counters of
// init.gen(), in row-major order.
Tensor normal(const Shape& shape, double std, const Init& init);        // N(0, std^2)
Tensor uniform(const Shape& shape, double bound, const Init& init);     // U(-bound, bound)
Tensor zeros(const Shape& shape, const Init& init);
Tensor ones(const Shape& shape, const Init& init);

}  // namespace init
}  // namespace brigade::nn
