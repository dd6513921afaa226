// GPT-2's shape scaled down for tests on the GPU (and the emulator, which needs tiny sizes): head dim
// 64 (the attention kernels GPT-2 takes), bf16 compute over f32 master weights, biases, the tied
// embedding; and random token ids for it.
#pragma once

#include <cstdint>

#include "core/factory.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "nn/gpt.h"

namespace test {

constexpr int64_t kTinyVocab = 32, kTinySeq = 16;

inline brigade::nn::GPTConfig tiny_gpt2(int64_t layers, brigade::Device device) {
  brigade::nn::GPTConfig c;
  c.vocab_size = kTinyVocab;
  c.block_size = kTinySeq;
  c.n_layer = layers;
  c.n_head = 1;
  c.n_embd = 64;
  c.seed = 3;
  c.device = device;
  c.compute_dtype = brigade::DType::bf16;
  return c;
}

// [2, kTinySeq] token ids in [0, kTinyVocab) on `device`.
inline brigade::Tensor tiny_tokens(uint64_t seed, brigade::Device device) {
  using brigade::DType;
  brigade::Generator gen(seed);
  const brigade::Tensor ids =
      brigade::uniform({2, kTinySeq}, 0.0, double(kTinyVocab) - 1e-9, DType::f64, brigade::Device::cpu(), &gen);
  return brigade::ops::to_dtype(ids, DType::i64).to(device);
}

}  // namespace test
