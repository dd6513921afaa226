// How layers create their parameters: dtype, device, and where the random numbers come from.
//
// Every layer constructor takes an `Init`. Random values are drawn on the host from Philox and then
// copied to the target device, so the same draw gives the same weights — bit for bit after rounding
// to the dtype — on every device and in every dtype. Where the numbers come from is one of two ways:
//
//  - In construction order (the plain way, for small models built in one piece): every random
//    parameter takes the next numbers of one Generator, so the weights are a function of (seed,
//    the order the layers were built in):
//
//      Generator gen(42);
//      auto fc = std::make_shared<nn::Linear>(64, 10, nn::LinearOptions{.init = {.generator = &gen}});
//
//    Without a generator, layers draw from default_generator() (see manual_seed).
//
//  - By name (Init::keyed): every random parameter draws from a stream of its own, keyed by (seed,
//    the parameter's full name) — core/rng.h's named_generator, element i of the tensor in row-major
//    order being the stream's element i. Its values then do not depend on which other layers were
//    built, or in which order: a pipeline rank that builds only its own layers draws exactly what the
//    whole model would. Each layer passes the names down — a child module is built with
//    init.at("attn"), a parameter drawn with init.at("weight") — so the path of the `Init` a layer
//    receives must be that layer's full name in the model:
//
//      const nn::Init keyed = nn::Init::keyed(42);
//      auto fc = std::make_shared<nn::Linear>(64, 10, nn::LinearOptions{.init = keyed.at("blocks").at("3").at("fc")});
//      // fc->weight is drawn from named_generator(42, "blocks.3.fc.weight")
//
//    nn::GPT initialises this way. Non-random parameters (zeros, ones) do not depend on the mode.
#pragma once

#include <optional>
#include <string>

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

  // Set: draw by name (see above) from this seed; `generator` is then not used.
  std::optional<uint64_t> name_seed = std::nullopt;
  // The dotted full name of what is being built ("blocks.3.attn"): layers extend it with at(). Only
  // by-name draws read it.
  std::string path = "";

  // An Init that draws by name from `seed` (the rest as given).
  static Init keyed(uint64_t seed, Init base) {
    base.name_seed = seed;
    return base;
  }
  static Init keyed(uint64_t seed);
  // This Init for the child or parameter `name`: path + "." + name (just `name` at the top).
  Init at(const std::string& name) const {
    Init out = *this;
    out.path = path.empty() ? name : path + "." + name;
    return out;
  }
  // Where the next random tensor comes from in construction order (by name, see init::normal).
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
// init.gen(), in row-major order — or, with init.name_seed, are the first shape_numel(shape)
// elements of named_generator(*init.name_seed, init.path) (the path names the parameter itself:
// callers pass init.at("weight")).
Tensor normal(const Shape& shape, double std, const Init& init);        // N(0, std^2)
Tensor uniform(const Shape& shape, double bound, const Init& init);     // U(-bound, bound)
Tensor zeros(const Shape& shape, const Init& init);
Tensor ones(const Shape& shape, const Init& init);

}  // namespace init
inline Init Init::keyed(uint64_t seed) { return keyed(seed, Init{}); }

}  // namespace brigade::nn
