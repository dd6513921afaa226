#include "nn/hf_model.h"

#include <filesystem>
#include <set>

#include "nn/gpt2_hf.h"

namespace brigade::nn {

namespace fs = std::filesystem;

namespace {

// The family config.json (beside the weights) names, if any.
std::optional<Arch> family_of_config(const HfIndex& index) {
  const fs::path config = fs::path(index.path).parent_path() / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) return std::nullopt;
  const std::string type = hf_model_type(config.string());
  if (type == "gpt2") return Arch::gpt2;
  if (type == "llama" || type == "mistral" || type == "qwen2") return Arch::llama;
  return std::nullopt;
}

}  // namespace

std::optional<HfModel> find_hf_model(const std::string& path) {
  HfModel hf;
  std::error_code ec;
  const std::string index_path = hf_index_path(path);
  const fs::path single = fs::path(path) / kHfSingleName;
  if (!index_path.empty()) {
    hf.index = read_hf_index(index_path);
  } else if (fs::is_directory(path, ec)) {
    if (!fs::is_regular_file(single, ec)) return std::nullopt;  // a brigade checkpoint directory
    hf.index = hf_single_file_index(single.string());
  } else {
    hf.index = hf_single_file_index(path);
  }
  std::set<std::string> names;
  for (const auto& [name, shard] : hf.index.weight_map) names.insert(name);
  // A single file named by its path whose tensors are neither family's is a brigade checkpoint (even
  // beside a config.json); an index or a directory's model.safetensors is Hugging Face's all the
  // same, and its family's reader says which tensor is missing.
  const bool named_file = index_path.empty() && !fs::is_directory(path, ec);
  if (named_file && !is_hf_llama(names) && !is_hf_gpt2(names)) return std::nullopt;
  std::optional<Arch> family = family_of_config(hf.index);
  if (!family && is_hf_llama(names)) family = Arch::llama;
  hf.family = family.value_or(Arch::gpt2);
  if (hf.family == Arch::llama) hf.llama = read_hf_llama_files(hf.index);
  return hf;
}

GPTConfig hf_model_config(const HfModel& hf) {
  return hf.family == Arch::llama ? hf.llama->config.model : hf_gpt2_config(hf.index);
}

void load_hf_model(GPT& model, const HfModel& hf) {
  if (hf.family == Arch::llama) load_hf_llama(model, *hf.llama);
  else load_hf_gpt2_indexed(model, hf.index);
}

}  // namespace brigade::nn
