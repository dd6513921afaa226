#include "core/rng.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace brigade {

std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key) {
  return philox4x32({uint32_t(counter), uint32_t(counter >> 32), 0u, 0u}, {uint32_t(key), uint32_t(key >> 32)});
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  const uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;    // round multipliers
  const uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c0, p1 = uint64_t(kMul1) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

double philox_uniform(uint64_t seed, uint64_t counter) {
  auto w = philox4x32(counter, seed);
  // 53 random bits -> a double in [0, 1).
  uint64_t bits = (uint64_t(w[0]) << 21) ^ (uint64_t(w[1]) >> 11);
  return double(bits & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
}

double philox_normal(uint64_t seed, uint64_t counter) {
  auto w = philox4x32(counter, seed);
  double u1 = (double(w[0]) + 1.0) * 0x1.0p-32;  // (0, 1]: log is finite
  double u2 = double(w[1]) * 0x1.0p-32;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator() = Generator(seed); }

namespace {

// The next representable value of T below v (towards -infinity).
template <class T>
T step_down(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return std::nextafter(v, -std::numeric_limits<T>::infinity());
  } else if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {  // sign-magnitude bits
    T out = v;
    if (v.bits == 0x0000) out.bits = 0x8001;       // +0 -> smallest negative subnormal
    else if (v.bits & 0x8000) out.bits = uint16_t(v.bits + 1);  // negative: larger magnitude
    else out.bits = uint16_t(v.bits - 1);          // positive: smaller magnitude
    return out;
  } else {
    return v;  // integers never reach here (random tensors are floating point)
  }
}

// `sample` gives doubles in [low, high); rounding to a narrow dtype can land exactly on `high`
// (a bf16 in [0, 1) has only 8 bits). Values at or above `upper` are stepped down below it.
template <class Sample>
Tensor fill_random(const char* op, const Shape& shape, DType dtype, Device device, Generator* gen, Sample sample,
                   double upper = std::numeric_limits<double>::infinity()) {
  BRIGADE_CHECK(is_floating(dtype), op, ": dtype must be floating point, got ", dtype_name(dtype));
  Generator& g = gen ? *gen : default_generator();
  Tensor out = empty(shape, dtype, Device::cpu());
  uint64_t first = g.advance(uint64_t(out.numel()));
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      T v = from_double<T>(sample(g.seed, first + uint64_t(i)));
      while (to_double(v) >= upper) v = step_down(v);
      p[i] = v;
    }
  });
  return device.is_cpu() ? out : out.to(device);
}

}  // namespace

Tensor randn(const Shape& shape, DType dtype, Device device, Generator* gen) {
  return fill_random("randn", shape, dtype, device, gen, philox_normal);
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device, Generator* gen) {
  BRIGADE_CHECK(low < high, "uniform: low (", low, ") must be below high (", high, ")");
  return fill_random("uniform", shape, dtype, device, gen,
                     [&](uint64_t s, uint64_t c) { return low + (high - low) * philox_uniform(s, c); }, high);
}

}  // namespace brigade
