// The model flags of the commands that build a GPT (train, bench step, bench pipeline): --layers,
// --heads and --embd, with the vocabulary and sequence length each takes from its own task, and the
// one place they become an nn::GPTConfig.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "nn/gpt.h"

namespace brigade::cli {

struct GPTFlags {
  int64_t layers = 0, heads = 0, embd = 0;  // --layers, --heads, --embd
  int64_t vocab = 0;    // token ids in [0, vocab)
  int64_t context = 0;  // the longest sequence
};

// The GPT the flags describe, on `device`, computing in `compute` (weights f32), its weights drawn
// from `seed`; no dropout, so that a step is a pure function of its data.
inline nn::GPTConfig gpt_config(const GPTFlags& flags, Device device, DType compute, uint64_t seed) {
  nn::GPTConfig c;
  c.vocab_size = flags.vocab;
  c.block_size = flags.context;
  c.n_layer = flags.layers;
  c.n_head = flags.heads;
  c.n_embd = flags.embd;
  c.dropout = 0;
  c.device = device;
  c.compute_dtype = compute;
  c.seed = seed;
  return c;
}

}  // namespace brigade::cli
