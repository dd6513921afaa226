#include "core/rng.h"

#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "core/parallel.h"
#include "core/philox.h"
#include "core/stream.h"

#if BRIGADE_HAVE_CUDA
#include "core/cuda/rng.h"
#endif

namespace brigade {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  philox::Words r = philox::philox4x32(philox::Words{{counter[0], counter[1], counter[2], counter[3]}}, key[0], key[1]);
  return {r.w[0], r.w[1], r.w[2], r.w[3]};
}

std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key) {
  philox::Words r = philox::philox4x32(counter, key);
  return {r.w[0], r.w[1], r.w[2], r.w[3]};
}

double philox_uniform(uint64_t seed, uint64_t counter) { return philox::uniform(seed, counter); }
double philox_normal(uint64_t seed, uint64_t counter) { return philox::normal(seed, counter); }

uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64: offset basis
  for (const char c : name) {
    h ^= uint64_t(static_cast<unsigned char>(c));
    h *= 0x100000001b3ull;  // FNV prime
  }
  return h;
}

namespace {

uint64_t mix(uint64_t z) {  // SplitMix64's finaliser: a bijection that spreads every bit
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t stream_key(uint64_t seed, std::string_view name) { return mix(seed ^ mix(name_hash(name))); }

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

// Fills `out` (contiguous, on the CPU) with sample(seed, first + i) rounded to its dtype. Rounding
// to a narrow dtype can land exactly on `upper` (a bf16 in [0, 1) has only 8 bits), so values at or
// above it are stepped down below it. Element i depends only on i, so threads may split the range.
template <class Sample>
void fill_random_cpu(const Tensor& out, uint64_t seed, uint64_t first, Sample sample, double upper) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    parallel_for(out.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        T v = from_double<T>(sample(seed, first + uint64_t(i)));
        while (to_double(v) >= upper) v = step_down(v);
        p[i] = v;
      }
    });
  });
}

// The output tensor; reserves out.numel() counters of the generator and sets `first` to the first.
Tensor start_random(const char* op, const Shape& shape, DType dtype, Device device, Generator*& gen, uint64_t& first) {
  BRIGADE_CHECK(is_floating(dtype), op, ": dtype must be floating point, got ", dtype_name(dtype));
  BRIGADE_CHECK(device.is_cpu() || (device.index >= 0 && device.index < cuda_device_count()), op, ": ",
                device.str(), " is not available (", cuda_device_count(), " GPUs in this process)");
  std::optional<StreamGuard> on_device;  // a GPU allocation goes to the current CUDA device
  if (device.is_cuda()) on_device.emplace(current_stream(device));
  Tensor out = empty(shape, dtype, device);
  if (gen == nullptr) gen = &default_generator();
  first = gen->advance(uint64_t(out.numel()));
  return out;
}

}  // namespace

// Both distributions are computed where the tensor lives — by GPU threads for a CUDA tensor — from
// the same core/philox.h functions, so every device produces the same bits.
Tensor randn(const Shape& shape, DType dtype, Device device, Generator* gen) {
  uint64_t first = 0;
  Tensor out = start_random("randn", shape, dtype, device, gen, first);
#if BRIGADE_HAVE_CUDA
  if (device.is_cuda()) {
    cuda::fill_normal(out, gen->seed, first);
    return out;
  }
#endif
  fill_random_cpu(out, gen->seed, first, philox::normal, std::numeric_limits<double>::infinity());
  return out;
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device, Generator* gen) {
  BRIGADE_CHECK(low < high, "uniform: low (", low, ") must be below high (", high, ")");
  uint64_t first = 0;
  Tensor out = start_random("uniform", shape, dtype, device, gen, first);
#if BRIGADE_HAVE_CUDA
  if (device.is_cuda()) {
    cuda::fill_uniform(out, gen->seed, first, low, high);
    return out;
  }
#endif
  fill_random_cpu(
      out, gen->seed, first, [low, high](uint64_t s, uint64_t c) { return philox::uniform(s, c, low, high); }, high);
  return out;
}

}  // namespace brigade
