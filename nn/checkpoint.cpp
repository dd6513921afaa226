#include "nn/checkpoint.h"

#include <filesystem>

#include "core/safetensors.h"
#include "nn/sharded_checkpoint.h"

namespace brigade::nn {
namespace {

constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optim.";
constexpr const char* kVersionKey = "brigade.checkpoint";
constexpr const char* kVersion = "1";

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

void save_checkpoint(const std::string& path, const std::map<std::string, Tensor>& model_state,
                     const std::map<std::string, Tensor>& optimizer_state,
                     const std::map<std::string, std::string>& metadata) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : model_state) tensors[kModelPrefix + name] = t;
  for (const auto& [name, t] : optimizer_state) tensors[kOptimizerPrefix + name] = t;
  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : metadata) {
    BRIGADE_CHECK(!starts_with(key, "brigade."), "save_checkpoint: metadata key '", key,
                  "' is reserved (keys starting with \"brigade.\" belong to the checkpoint format)");
    meta[key] = value;
  }
  meta.emplace(kVersionKey, kVersion);  // cannot clash: "brigade." keys were refused above
  save_safetensors(path, tensors, meta);
}

Checkpoint load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return load_sharded_checkpoint(path, read_sharded_index(path));
  return checkpoint_from(load_safetensors(path), path);
}

Checkpoint checkpoint_from(Safetensors file, const std::string& path) {
  auto version = file.metadata.find(kVersionKey);
  BRIGADE_CHECK(version != file.metadata.end(), "load_checkpoint: '", path,
                "' is a safetensors file but not a brigade checkpoint (no \"", kVersionKey, "\" metadata)");
  BRIGADE_CHECK(version->second == kVersion, "load_checkpoint: '", path, "' has checkpoint layout version ",
                version->second, "; this build reads version ", kVersion);
  file.metadata.erase(version);

  Checkpoint c;
  c.metadata = std::move(file.metadata);
  const std::string model_prefix = kModelPrefix, optimizer_prefix = kOptimizerPrefix;
  for (auto& [name, t] : file.tensors) {
    if (starts_with(name, model_prefix)) c.model[name.substr(model_prefix.size())] = t;
    else if (starts_with(name, optimizer_prefix)) c.optimizer[name.substr(optimizer_prefix.size())] = t;
    else fail("load_checkpoint: '", path, "' holds tensor '", name, "', which has neither the \"", kModelPrefix,
              "\" nor the \"", kOptimizerPrefix, "\" prefix");
  }
  return c;
}

}  // namespace brigade::nn
