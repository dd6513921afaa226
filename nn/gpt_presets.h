// Model sizes by name, for every command that offers --model (train, plan), read from one table that
// lives with the model: GPT-2's four sizes (Radford et al. 2019) by the names Hugging Face publishes
// them under, and LLaMA-style ones (nn::Arch::llama).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/params.h"
#include "nn/arch.h"

namespace brigade::nn {

struct GPTConfig;

struct GPTPreset {
  const char* name;  // "gpt2", "gpt2-medium", ..., "llama-1b"
  int64_t n_layer, n_head, n_embd, block_size;  // as nn::GPTConfig names them
  int64_t vocab_size = 50257;                   // GPT-2's tokenizer
  Arch arch = Arch::gpt2;
  int64_t n_kv_head = 0;   // 0: n_head
  int64_t mlp_hidden = 0;  // 0: the family's default (mlp_hidden_of)
  RopeParams rope = {};
  bool tie_embeddings = true;
};

// Smallest first, GPT-2's then LLaMA's.
const std::vector<GPTPreset>& gpt_presets();

// The preset called `name`, or null.
const GPTPreset* find_gpt_preset(const std::string& name);

// "gpt2, gpt2-medium, ... or llama-1b": the names, for help texts and errors.
std::string gpt_preset_names();

// `config` with the preset's sizes and family (its vocabulary included); the rest as it was.
void apply_preset(const GPTPreset& preset, GPTConfig& config);

}  // namespace brigade::nn
