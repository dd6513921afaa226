#include "nn/gpt_presets.h"

#include "nn/gpt.h"

namespace brigade::nn {

namespace {

// LLaMA 3's rope: theta 500000, frequencies scaled for contexts past 8192 positions (Llama 3.2's
// config.json: factor 32).
RopeParams llama3_rope() {
  return RopeParams{.theta = 500000, .llama3 = RopeLlama3Scaling{.factor = 32, .low_freq_factor = 1,
                                                                  .high_freq_factor = 4,
                                                                  .original_max_position_embeddings = 8192}};
}

}  // namespace

const std::vector<GPTPreset>& gpt_presets() {
  static const std::vector<GPTPreset> presets = {
      {"gpt2", 12, 12, 768, 1024},          // 124M parameters
      {"gpt2-medium", 24, 16, 1024, 1024},  // 350M
      {"gpt2-large", 36, 20, 1280, 1024},   // 774M
      {"gpt2-xl", 48, 25, 1600, 1024},      // 1.5B
      // A test-sized llama: 4 blocks, 2 kv heads for 4 query heads, a 256-token byte-level vocabulary
      // (a model with --data takes the data's vocabulary). 0.2M parameters.
      {.name = "llama-tiny", .n_layer = 4, .n_head = 4, .n_embd = 64, .block_size = 256, .vocab_size = 256,
       .arch = Arch::llama, .n_kv_head = 2, .mlp_hidden = 192},
      // Shaped like Llama-3.2-1B: 16 blocks 2048 wide, 32 query heads sharing 8 kv heads, SwiGLU of 8192,
      // its 128256-token vocabulary, LLaMA 3's rope, the head tied. 1.24B parameters; a 2048-token
      // training context (the model's rope reaches further).
      {.name = "llama-1b", .n_layer = 16, .n_head = 32, .n_embd = 2048, .block_size = 2048, .vocab_size = 128256,
       .arch = Arch::llama, .n_kv_head = 8, .mlp_hidden = 8192, .rope = llama3_rope()},
  };
  return presets;
}

const GPTPreset* find_gpt_preset(const std::string& name) {
  for (const GPTPreset& p : gpt_presets())
    if (name == p.name) return &p;
  return nullptr;
}

std::string gpt_preset_names() {
  const std::vector<GPTPreset>& presets = gpt_presets();
  std::string out;
  for (size_t i = 0; i < presets.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == presets.size() ? " or " : ", ") + presets[i].name;
  return out;
}

void apply_preset(const GPTPreset& p, GPTConfig& c) {
  c.n_layer = p.n_layer;
  c.n_head = p.n_head;
  c.n_embd = p.n_embd;
  c.block_size = p.block_size;
  c.vocab_size = p.vocab_size;
  c.arch = p.arch;
  c.n_kv_head = p.n_kv_head;
  c.mlp_hidden = p.mlp_hidden;
  c.rope = p.rope;
  c.tie_embeddings = p.tie_embeddings;
  if (p.arch == Arch::llama) c.bias = false;
}

}  // namespace brigade::nn
