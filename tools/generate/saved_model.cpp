#include "generate/saved_model.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "core/error.h"
#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/gpt2_hf.h"
#include "nn/hf_shards.h"
#include "text/tokenizer_files.h"

namespace brigade::generate_cli {

namespace {

int64_t metadata_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  BRIGADE_CHECK(it != meta.end(), "'", path, "': no '", key, "' in its metadata (not a `brigade train --data` checkpoint)");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  BRIGADE_CHECK(ec == std::errc() && end == it->second.data() + it->second.size() && v > 0, "'", path, "': bad '", key,
                "' in its metadata: '", it->second, "'");
  return v;
}

}  // namespace

SavedModel load_saved_model(const std::string& path, Device device, const std::string& tokenizer_dir) {
  // A `brigade train` checkpoint is a directory of shards (nn/sharded_checkpoint.h), or a single file
  // from an older build; a single file may also be Hugging Face's GPT-2, and so may a directory
  // holding (or the path of) a model.safetensors.index.json and its shards.
  const std::string hf_index = nn::hf_index_path(path);
  std::error_code ec;
  const bool sharded = hf_index.empty() && std::filesystem::is_directory(path, ec);
  Safetensors file = sharded ? Safetensors{} : hf_index.empty() ? load_safetensors(path)
                                                                : Safetensors{nn::load_hf_shards(nn::read_hf_index(hf_index)), {}};
  const std::string source = hf_index.empty() ? path : hf_index;  // config.json is beside it
  SavedModel saved;
  if (!sharded && nn::is_hf_gpt2(file.tensors)) {
    nn::GPTConfig config = nn::hf_gpt2_config(file.tensors, source);
    config.device = device;
    saved.model = std::make_shared<nn::GPT>(config);
    nn::load_hf_gpt2(*saved.model, file.tensors, source);
    saved.vocab = config.vocab_size;
  } else {
    const nn::Checkpoint ckpt = sharded ? nn::load_checkpoint(path) : nn::checkpoint_from(std::move(file), path);
    const auto& meta = ckpt.metadata;
    BRIGADE_CHECK(!meta.count("digits"), "'", path, "' is a checkpoint of the sort task (trained with --digits), not a "
                  "language model: train one with --data");
    nn::GPTConfig config;
    config.n_layer = metadata_int(meta, "layers", path);
    config.n_head = metadata_int(meta, "heads", path);
    config.n_embd = metadata_int(meta, "embd", path);
    config.block_size = metadata_int(meta, "context", path);
    config.vocab_size = metadata_int(meta, "vocab", path);
    config.device = device;
    saved.model = std::make_shared<nn::GPT>(config);
    std::map<std::string, Tensor> state = ckpt.model;
    for (auto& [name, t] : state) t = t.to(device);
    saved.model->load_state_dict(state);
    saved.vocab = meta.count("tokenizer_vocab") ? metadata_int(meta, "tokenizer_vocab", path) : config.vocab_size;
    if (meta.count("tokenizer.vocab_json") && meta.count("tokenizer.merges_txt")) {
      saved.tokenizer = text::parse_tokenizer(meta.at("tokenizer.vocab_json"), meta.at("tokenizer.merges_txt"),
                                              path + " (tokenizer.vocab_json)", path + " (tokenizer.merges_txt)");
    }
  }
  if (!tokenizer_dir.empty()) saved.tokenizer = text::load_tokenizer(tokenizer_dir);
  if (saved.tokenizer) {
    BRIGADE_CHECK(int64_t(saved.tokenizer->vocab_size()) <= saved.model->config().vocab_size, "'", path,
                  "': the tokenizer has ", saved.tokenizer->vocab_size(), " tokens, the model only ",
                  saved.model->config().vocab_size, " (a tokenizer of another model?)");
    saved.vocab = std::min(saved.vocab, int64_t(saved.tokenizer->vocab_size()));
  }
  saved.model->eval();
  return saved;
}

}  // namespace brigade::generate_cli
