// GPT-2's four sizes (Radford et al. 2019), by the names Hugging Face publishes them under. They
// live with the model so that every command that offers --model (train, plan) reads one table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::nn {

struct GPTPreset {
  const char* name;  // "gpt2", "gpt2-medium", ...
  int64_t n_layer, n_head, n_embd, block_size;  // as nn::GPTConfig names them; 50257 tokens each
};

// Smallest first.
const std::vector<GPTPreset>& gpt2_presets();

// The preset called `name`, or null.
const GPTPreset* find_gpt2_preset(const std::string& name);

// "gpt2, gpt2-medium, gpt2-large or gpt2-xl": the names, for help texts and errors.
std::string gpt2_preset_names();

}  // namespace brigade::nn
