#include "nn/gpt_presets.h"

namespace brigade::nn {

const std::vector<GPTPreset>& gpt2_presets() {
  static const std::vector<GPTPreset> presets = {
      {"gpt2", 12, 12, 768, 1024},          // 124M parameters
      {"gpt2-medium", 24, 16, 1024, 1024},  // 350M
      {"gpt2-large", 36, 20, 1280, 1024},   // 774M
      {"gpt2-xl", 48, 25, 1600, 1024},      // 1.5B
  };
  return presets;
}

const GPTPreset* find_gpt2_preset(const std::string& name) {
  for (const GPTPreset& p : gpt2_presets())
    if (name == p.name) return &p;
  return nullptr;
}

std::string gpt2_preset_names() {
  const std::vector<GPTPreset>& presets = gpt2_presets();
  std::string out;
  for (size_t i = 0; i < presets.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == presets.size() ? " or " : ", ") + presets[i].name;
  return out;
}

}  // namespace brigade::nn
