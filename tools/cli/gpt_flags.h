// The model flags of the commands that build a GPT (train, bench step, bench pipeline): --layers,
// --heads and --embd, the family's (--arch, --kv-heads, --mlp-hidden, --rope-theta, --untied), with
// the vocabulary and sequence length each takes from its own task, and the one place they become an
// nn::GPTConfig.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "kernels/params.h"
#include "nn/gpt.h"
#include "tools/cli/arch_choice.h"

namespace brigade::cli {

// The decoder family and what only it sizes.
struct DecoderFlags {
  nn::Arch arch = nn::Arch::gpt2;  // --arch
  int64_t kv_heads = 0;            // --kv-heads; 0: as many as heads
  int64_t mlp_hidden = 0;          // --mlp-hidden; 0: the family's default (nn::mlp_hidden_of)
  RopeParams rope = {};            // --rope-theta (a preset may bring LLaMA 3's scaling too)
  bool untied = false;             // --untied: a llama head with its own lm_head
  // No flags: what a Hugging Face model given to `brigade train --init-from` brings (LLaMA 2's
  // epsilon is 1e-6; Qwen2's attention has biases).
  double norm_eps = 1e-5;       // the LayerNorm's or RMSNorm's epsilon
  bool attention_bias = false;  // llama: biases on the attention's projections
};

struct GPTFlags {
  int64_t layers = 0, heads = 0, embd = 0;  // --layers, --heads, --embd
  int64_t vocab = 0;    // token ids in [0, vocab)
  int64_t context = 0;  // the longest sequence
  DecoderFlags decoder = {};
};

// Refuses, as a UsageError naming the flags and values, a family's flags that do not fit together:
// kv heads with gpt2 (unless as many as heads), kv heads that do not divide heads, an untied head
// with gpt2, and a llama whose head dim (embd / heads) is odd (rotary positions turn pairs).
inline void check_decoder_flags(const DecoderFlags& d, int64_t heads, int64_t embd) {
  const std::string H = std::to_string(heads), K = std::to_string(d.kv_heads);
  if (d.arch == nn::Arch::gpt2) {
    if (d.kv_heads != 0 && d.kv_heads != heads)
      throw UsageError("--kv-heads: a gpt2 model has as many key/value heads as heads (" + H + "); --kv-heads " + K +
                       " needs --arch llama");
    if (d.untied) throw UsageError("--untied: a gpt2 model's head is tied to its token embedding; it needs --arch llama");
    return;
  }
  if (d.kv_heads != 0 && heads % d.kv_heads != 0)
    throw UsageError("--kv-heads: " + K + " key/value heads do not divide --heads " + H);
  if (embd % heads == 0 && (embd / heads) % 2 != 0)
    throw UsageError("--heads: a llama's head dim --embd / --heads = " + std::to_string(embd) + " / " + H + " = " +
                     std::to_string(embd / heads) + " must be even (rotary positions turn pairs)");
}

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
  const DecoderFlags& d = flags.decoder;
  c.arch = d.arch;
  c.mlp_hidden = d.mlp_hidden;
  c.norm_eps = d.norm_eps;
  if (d.arch == nn::Arch::llama) {
    c.bias = d.attention_bias;  // LLaMA has none; Qwen2 on its attention
    c.n_kv_head = d.kv_heads;
    c.rope = d.rope;
    c.tie_embeddings = !d.untied;
  }
  return c;
}

}  // namespace brigade::cli
