// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
//
// Philox maps (key, counter) to four random 32-bit words with no hidden state, so element i of a
// random tensor can be computed independently from (seed, offset + i) — on a CPU loop or by GPU
// thread i — and both give the same numbers. A Generator is just (seed, offset); each random tensor
// consumes `numel` counters from it.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/tensor.h"

namespace brigade {

// The full generator: a 128-bit counter and a 64-bit key, as 32-bit words (Random123's layout).
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// The form brigade uses: counter = (lo, hi, 0, 0) of a 64-bit index, key = (lo, hi) of the seed.
std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key);

// Element `counter` of the uniform stream, in [0, 1); and of the normal stream (Box-Muller on the
// first two words, computed in double so every device rounds the same way).
double philox_uniform(uint64_t seed, uint64_t counter);
double philox_normal(uint64_t seed, uint64_t counter);

struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;
  explicit Generator(uint64_t s = 0) : seed(s) {}
  // Reserves n counters and returns the first. Atomic, so threads sharing a generator (pipeline
  // stages running dropout) each get their own block; which block a thread gets then depends on
  // timing — give each stage its own Generator where reproducibility across runs matters.
  uint64_t advance(uint64_t n) { return __atomic_fetch_add(&offset, n, __ATOMIC_RELAXED); }
};

// Named streams: one Philox stream per name, so what is drawn under a name does not depend on what
// else is drawn, or in which order (nn::Init::keyed uses them: a parameter's initial values are a
// function of the seed and its full name, "blocks.3.attn.qkv.weight", whatever else a process builds).
//
//   name_hash(name)        = FNV-1a 64 of the name's bytes: h = 0xcbf29ce484222325, then for each
//                            byte b: h = (h ^ b) * 0x100000001b3 (mod 2^64)
//   stream_key(seed, name) = mix(seed ^ mix(name_hash(name))), mix = SplitMix64's finaliser:
//                            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9; z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
//                            z ^ (z >> 31)
// and the stream is Generator(stream_key(seed, name)): element i of it is Philox at counter i under
// that key. Both functions are written out here (not std::hash, which differs between standard
// libraries and builds), so the same name gives the same numbers on every build and machine.
uint64_t name_hash(std::string_view name);
uint64_t stream_key(uint64_t seed, std::string_view name);
inline Generator named_generator(uint64_t seed, std::string_view name) { return Generator(stream_key(seed, name)); }

// The process-wide generator used when none is passed; manual_seed resets it to (seed, 0).
Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor randn(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu(), Generator* gen = nullptr);
// Uniform in [low, high).
Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::f32, Device device = Device::cpu(),
               Generator* gen = nullptr);

}  // namespace brigade
