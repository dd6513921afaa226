#include "generate/saved_model.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/safetensors.h"
#include "nn/sharded_checkpoint.h"
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

// The decoder family a `brigade train` checkpoint records (brigade train's settings --arch, --kv-heads,
// --mlp-hidden, --rope-theta, --untied, and rope_llama3, norm_eps and attention_bias); a checkpoint from
// before them is a gpt2 with epsilon 1e-5.
void read_decoder_metadata(const std::map<std::string, std::string>& meta, const std::string& path, nn::GPTConfig& config) {
  auto text = [&](const std::string& key, const std::string& absent) {
    auto it = meta.find(key);
    return it == meta.end() ? absent : it->second;
  };
  if (meta.count("norm_eps")) {  // checkpoints from before it used 1e-5
    std::istringstream eps(text("norm_eps", ""));
    BRIGADE_CHECK(bool(eps >> config.norm_eps), "'", path, "': bad 'norm_eps' in its metadata");
  }
  const std::string arch = text("arch", "gpt2");
  BRIGADE_CHECK(arch == "gpt2" || arch == "llama", "'", path, "': unknown 'arch' in its metadata: '", arch, "'");
  if (arch == "gpt2") return;
  config.arch = nn::Arch::llama;
  config.bias = text("attention_bias", "false") == "true";
  if (meta.count("kv-heads") && text("kv-heads", "0") != "0") config.n_kv_head = metadata_int(meta, "kv-heads", path);
  if (meta.count("mlp-hidden") && text("mlp-hidden", "0") != "0") config.mlp_hidden = metadata_int(meta, "mlp-hidden", path);
  config.tie_embeddings = text("untied", "tied") != "untied";
  std::istringstream numbers(text("rope-theta", "10000") + " " + text("rope_llama3", ""));
  BRIGADE_CHECK(bool(numbers >> config.rope.theta), "'", path, "': bad 'rope-theta' in its metadata");
  RopeLlama3Scaling l3;
  if (numbers >> l3.factor >> l3.low_freq_factor >> l3.high_freq_factor >> l3.original_max_position_embeddings)
    config.rope.llama3 = l3;
}

}  // namespace

SavedModelInfo read_saved_model_info(const std::string& path, const std::string& tokenizer_dir) {
  // A Hugging Face model (nn/hf_model.h); else a `brigade train` checkpoint: a directory of shards
  // (nn/sharded_checkpoint.h), or a single file from an older build.
  std::error_code ec;
  BRIGADE_CHECK(std::filesystem::exists(path, ec), "'", path, "': no such file or directory");
  SavedModelInfo info;
  info.path = path;
  info.hf = nn::find_hf_model(path);
  std::map<std::string, std::string> meta;
  if (info.hf) {
    info.kind = SavedModelInfo::Kind::hugging_face;
  } else if (std::filesystem::is_directory(path, ec)) {
    info.kind = SavedModelInfo::Kind::brigade_sharded;
    meta = nn::read_sharded_index(path).metadata;
  } else {
    info.kind = SavedModelInfo::Kind::brigade_file;
    meta = read_safetensors_header(path).metadata;
  }
  if (info.kind == SavedModelInfo::Kind::hugging_face) {
    info.config = nn::hf_model_config(*info.hf);
    info.vocab = info.config.vocab_size;
  } else {
    BRIGADE_CHECK(!meta.count("digits"), "'", path, "' is a checkpoint of the sort task (trained with --digits), not a "
                  "language model: train one with --data");
    nn::GPTConfig& config = info.config;
    config.n_layer = metadata_int(meta, "layers", path);
    config.n_head = metadata_int(meta, "heads", path);
    config.n_embd = metadata_int(meta, "embd", path);
    config.block_size = metadata_int(meta, "context", path);
    config.vocab_size = metadata_int(meta, "vocab", path);
    read_decoder_metadata(meta, path, config);
    info.vocab = meta.count("tokenizer_vocab") ? metadata_int(meta, "tokenizer_vocab", path) : config.vocab_size;
    info.tokenizer = text::tokenizer_from_metadata(meta, path);
  }
  if (!tokenizer_dir.empty()) {
    info.tokenizer = text::load_tokenizer(tokenizer_dir);
  } else if (info.kind == SavedModelInfo::Kind::hugging_face) {
    // A Hugging Face model directory holds its tokenizer beside config.json (tokenizer.json, or
    // GPT-2's vocab.json and merges.txt).
    const std::filesystem::path p(path);
    std::filesystem::path model_dir = std::filesystem::is_directory(p, ec) ? p : p.parent_path();
    if (model_dir.empty()) model_dir = ".";
    if (text::has_tokenizer(model_dir.string())) info.tokenizer = text::load_tokenizer(model_dir.string());
  }
  if (info.tokenizer) {
    BRIGADE_CHECK(int64_t(info.tokenizer->vocab_size()) <= info.config.vocab_size, "'", path, "': the tokenizer has ",
                  info.tokenizer->vocab_size(), " tokens, the model only ", info.config.vocab_size,
                  " (a tokenizer of another model?)");
    info.vocab = std::min(info.vocab, int64_t(info.tokenizer->vocab_size()));
  }
  return info;
}

void load_saved_weights(const SavedModelInfo& info, nn::GPT& model) {
  if (info.kind == SavedModelInfo::Kind::hugging_face) {
    nn::load_hf_model(model, *info.hf);
    return;
  }
  // The parameters the model holds, and no optimizer state: generation never steps.
  std::set<std::string> held;
  for (const auto& [name, p] : model.named_parameters()) held.insert(name);
  const nn::Checkpoint ckpt = info.kind == SavedModelInfo::Kind::brigade_sharded
                                  ? nn::load_sharded_checkpoint(info.path, nn::read_sharded_index(info.path), &held,
                                                                /*optimizer=*/false)
                                  : nn::load_checkpoint_part(info.path, held, /*optimizer=*/false);
  std::map<std::string, Tensor> state;
  for (const std::string& name : held) {
    auto it = ckpt.model.find(name);
    BRIGADE_CHECK(it != ckpt.model.end(), "'", info.path, "': no parameter '", name,
                  "' (a checkpoint of another model?)");
    state.emplace(name, it->second.to(model.config().device));
  }
  model.load_state_dict(state);
}

SavedModel load_saved_model(const std::string& path, Device device, const std::string& tokenizer_dir) {
  SavedModelInfo info = read_saved_model_info(path, tokenizer_dir);
  info.config.device = device;
  SavedModel saved;
  saved.model = std::make_shared<nn::GPT>(info.config);
  load_saved_weights(info, *saved.model);
  saved.model->eval();
  saved.tokenizer = std::move(info.tokenizer);
  saved.vocab = info.vocab;
  return saved;
}

}  // namespace brigade::generate_cli
