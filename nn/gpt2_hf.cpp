#include "nn/gpt2_hf.h"

#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/json.h"
#include "core/read_file.h"
#include "core/safetensors.h"
#include "nn/hf_shards.h"
#include "kernels/ops.h"

namespace brigade::nn {

namespace fs = std::filesystem;

namespace {

// One tensor's two names, and whether its matrix is stored transposed on the Hugging Face side.
struct Name {
  std::string hf, ours;
  bool transposed;
};

std::vector<Name> names_of(int64_t n_layer) {
  std::vector<Name> names = {{"wte.weight", "embed.wte.weight", false}, {"wpe.weight", "embed.wpe.weight", false}};
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".";
    for (const char* part : {"weight", "bias"}) {
      const std::string p = part;
      const bool matrix = p == "weight";
      names.push_back({h + "ln_1." + p, b + "ln1." + p, false});
      names.push_back({h + "attn.c_attn." + p, b + "attn.qkv." + p, matrix});
      names.push_back({h + "attn.c_proj." + p, b + "attn.proj." + p, matrix});
      names.push_back({h + "ln_2." + p, b + "ln2." + p, false});
      names.push_back({h + "mlp.c_fc." + p, b + "mlp.fc." + p, matrix});
      names.push_back({h + "mlp.c_proj." + p, b + "mlp.proj." + p, matrix});
    }
  }
  names.push_back({"ln_f.weight", "head.ln_f.weight", false});
  names.push_back({"ln_f.bias", "head.ln_f.bias", false});
  return names;
}

// A file's tensor name without the "transformer." prefix of save_pretrained; nothing for the
// causal-mask buffers, which are not weights.
std::optional<std::string> normalized_name(const std::string& name) {
  const std::string n = name.starts_with("transformer.") ? name.substr(12) : name;
  const bool mask = n.starts_with("h.") && (n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias"));
  if (mask) return std::nullopt;
  return n;
}

std::map<std::string, Tensor> normalized(const std::map<std::string, Tensor>& hf) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : hf)
    if (auto n = normalized_name(name)) out.emplace(*n, t);
  return out;
}

// Every tensor an `n_layer`-layer GPT-2 has is among `names` (normalized), and nothing else but a
// tied lm_head.weight: checked on names alone, so that a reader of some tensors checks all of them.
void check_names(const std::set<std::string>& names, int64_t n_layer, const std::string& source) {
  std::set<std::string> unused = names;
  unused.erase("lm_head.weight");
  for (const Name& n : names_of(n_layer)) {
    BRIGADE_CHECK(names.count(n.hf), source, ": no tensor '", n.hf, "' (not a GPT-2 file in the Hugging Face layout?)");
    unused.erase(n.hf);
  }
  if (!unused.empty()) {
    std::string list;
    for (const std::string& n : unused) list += (list.empty() ? "'" : ", '") + n + "'";
    fail(source, ": tensors a ", n_layer, "-layer GPT-2 does not have: ", list);
  }
}

// The "n_head" of the config.json beside `path`, when there is one that gives it.
std::optional<int64_t> config_json_n_head(const std::string& path) {
  const std::filesystem::path config_json = std::filesystem::path(path).parent_path() / "config.json";
  if (!std::filesystem::exists(config_json)) return std::nullopt;
  const std::string file = config_json.string();
  JsonLimits limits;
  limits.context = "'" + file + "'";
  limits.object_root = true;
  const Json config = parse_json(read_file(file, "hf_gpt2_config"), limits);
  for (const auto& [key, value] : config.members) {
    if (key != "n_head") continue;
    BRIGADE_CHECK(value.kind == Json::Kind::number && value.integer && !value.negative, limits.context,
                  "': n_head is not a whole number");
    return int64_t(value.magnitude);
  }
  return std::nullopt;
}

template <class Value>
int64_t count_layers(const std::map<std::string, Value>& hf) {
  int64_t n = 0;
  while (hf.count("h." + std::to_string(n) + ".ln_1.weight")) ++n;
  return n;
}

const Tensor& need(const std::map<std::string, Tensor>& hf, const std::string& name, const std::string& source) {
  auto it = hf.find(name);
  BRIGADE_CHECK(it != hf.end(), source, ": no tensor '", name, "' (not a GPT-2 file in the Hugging Face layout?)");
  return it->second;
}

}  // namespace

bool is_hf_gpt2(const std::set<std::string>& names) {
  std::set<std::string> hf;
  for (const std::string& name : names)
    if (auto n = normalized_name(name)) hf.insert(*n);
  return hf.count("wte.weight") && hf.count("h.0.attn.c_attn.weight");
}

bool is_hf_gpt2(const std::map<std::string, Tensor>& tensors) {
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) names.insert(name);
  return is_hf_gpt2(names);
}

GPTConfig hf_gpt2_config(const std::string& path) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : read_safetensors_header(path).tensors) shapes.emplace(name, t.shape);
  return hf_gpt2_config(shapes, path);
}

GPTConfig hf_gpt2_config(const HfIndex& index) {
  // The names from the weight map; the two shapes that size the model from their shards' headers.
  std::map<std::string, Shape> shapes;
  std::map<std::string, std::set<std::string>> sized;  // shard -> the names it sizes
  for (const auto& [name, shard] : index.weight_map) {
    shapes.emplace(name, Shape{});
    const auto n = normalized_name(name);
    if (n && (*n == "wte.weight" || *n == "wpe.weight")) sized[shard].insert(name);
  }
  for (const auto& [shard, names] : sized) {
    const SafetensorsHeader header = read_safetensors_header((fs::path(index.dir) / shard).string());
    for (const std::string& name : names) {
      auto it = header.tensors.find(name);
      BRIGADE_CHECK(it != header.tensors.end(), index.path, ": the index puts '", name, "' in ", shard,
                    ", which does not hold it");
      shapes[name] = it->second.shape;
    }
  }
  return hf_gpt2_config(shapes, index.path);
}

GPTConfig hf_gpt2_config(const std::map<std::string, Tensor>& tensors, const std::string& path) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : tensors) shapes.emplace(name, t.shape());
  return hf_gpt2_config(shapes, path);
}

GPTConfig hf_gpt2_config(const std::map<std::string, Shape>& file_shapes, const std::string& path) {
  std::map<std::string, Shape> hf;
  for (const auto& [name, shape] : file_shapes)
    if (auto n = normalized_name(name)) hf.emplace(*n, shape);
  auto need = [&](const std::string& name) -> const Shape& {
    auto it = hf.find(name);
    BRIGADE_CHECK(it != hf.end(), path, ": no tensor '", name, "' (not a GPT-2 file in the Hugging Face layout?)");
    return it->second;
  };
  const Shape& wte = need("wte.weight");
  const Shape& wpe = need("wpe.weight");
  BRIGADE_CHECK(wte.size() == 2 && wpe.size() == 2 && wte[1] == wpe[1], path, ": wte.weight ", shape_str(wte),
                " and wpe.weight ", shape_str(wpe), " are not [vocab, C] and [context, C]");
  GPTConfig c;
  c.vocab_size = wte[0];
  c.n_embd = wte[1];
  c.block_size = wpe[0];
  c.n_layer = count_layers(hf);
  c.bias = true;
  BRIGADE_CHECK(c.n_layer > 0, path, ": no transformer blocks (h.0.ln_1.weight ...)");
  // The head count is not in the weights: Hugging Face keeps it in config.json.
  const std::optional<int64_t> n_head = config_json_n_head(path);
  const bool from_config = n_head.has_value();
  if (from_config) c.n_head = *n_head;
  if (!from_config) {
    const std::map<int64_t, int64_t> gpt2_heads = {{768, 12}, {1024, 16}, {1280, 20}, {1600, 25}};
    auto it = gpt2_heads.find(c.n_embd);
    BRIGADE_CHECK(it != gpt2_heads.end(), path, ": width ", c.n_embd,
                  " is none of GPT-2's (768, 1024, 1280, 1600) and no config.json beside it gives n_head");
    c.n_head = it->second;
  }
  BRIGADE_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0, path, ": ", c.n_head, " heads do not divide the width ",
                c.n_embd);
  return c;
}

std::map<std::string, Tensor> state_dict_from_hf_gpt2(const std::map<std::string, Tensor>& file,
                                                      const GPTConfig& config, const std::string& source,
                                                      const std::set<std::string>* held) {
  const auto hf = normalized(file);
  if (held == nullptr) {
    std::set<std::string> names;
    for (const auto& [name, t] : hf) names.insert(name);
    check_names(names, config.n_layer, source);
  }
  std::map<std::string, Tensor> out;
  for (const Name& n : names_of(config.n_layer)) {
    if (held && !held->count(n.ours)) continue;
    Tensor t = need(hf, n.hf, source);
    if (n.transposed) {
      BRIGADE_CHECK(t.dim() == 2, source, ": '", n.hf, "' is ", shape_str(t.shape()), ", not a matrix");
      t = t.transpose(0, 1);
    }
    t = t.to(config.dtype).contiguous();
    if (n.ours == "embed.wte.weight" && t.dim() == 2 && t.shape()[0] < config.vocab_size) {
      // A padded vocabulary: the file's rows first, zeros after (tokens no tokenizer ever produces).
      Tensor padded = zeros({config.vocab_size, t.shape()[1]}, config.dtype);
      ops::copy_(padded.slice(0, 0, t.shape()[0]), t);
      t = padded;
    }
    // A shorter context: the first positions (the model never sees the others).
    if (n.ours == "embed.wpe.weight" && t.dim() == 2 && t.shape()[0] > config.block_size)
      t = t.slice(0, 0, config.block_size).contiguous();
    out[n.ours] = t;
  }
  if (hf.count("lm_head.weight") && hf.count("wte.weight")) {
    const Tensor& head = hf.at("lm_head.weight");
    const Tensor& wte = hf.at("wte.weight");
    // load_safetensors gives contiguous CPU tensors: equal means the same bytes.
    const bool same = head.shape() == wte.shape() && head.dtype() == wte.dtype() &&
                      std::memcmp(head.raw_data(), wte.raw_data(), head.nbytes()) == 0;
    BRIGADE_CHECK(same, source,
                  ": lm_head.weight differs from wte.weight; brigade's GPT ties them, so it cannot hold this model");
  }
  return out;
}

std::map<std::string, Tensor> hf_gpt2_from_state_dict(const std::map<std::string, Tensor>& state, int64_t n_layer,
                                                      int64_t vocab) {
  std::map<std::string, Tensor> out;
  for (const Name& n : names_of(n_layer)) {
    auto it = state.find(n.ours);
    BRIGADE_CHECK(it != state.end(), "hf_gpt2_from_state_dict: the model has no '", n.ours, "'");
    Tensor t = it->second.to(Device::cpu()).to(DType::f32);
    if (n.transposed) t = t.transpose(0, 1);
    if (n.ours == "embed.wte.weight" && vocab > 0) {
      BRIGADE_CHECK(vocab <= t.shape()[0], "hf_gpt2_from_state_dict: vocab ", vocab, " is larger than the model's ",
                    t.shape()[0]);
      t = t.slice(0, 0, vocab);
    }
    out[n.hf] = t.contiguous();
  }
  return out;
}

std::string hf_gpt2_config_json(const GPTConfig& config, int64_t vocab) {
  return "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"n_embd\": " +
         std::to_string(config.n_embd) + ",\n  \"n_head\": " + std::to_string(config.n_head) +
         ",\n  \"n_layer\": " + std::to_string(config.n_layer) + ",\n  \"n_positions\": " +
         std::to_string(config.block_size) + ",\n  \"vocab_size\": " +
         std::to_string(vocab > 0 ? vocab : config.vocab_size) + "\n}\n";
}

void load_hf_gpt2(GPT& model, const std::string& path) {
  load_hf_gpt2(model, load_safetensors(path).tensors, path);
}

void load_hf_gpt2(GPT& model, const std::map<std::string, Tensor>& tensors, const std::string& path) {
  const GPTConfig file = hf_gpt2_config(tensors, path);
  const GPTConfig& c = model.config();
  BRIGADE_CHECK(file.n_layer == c.n_layer && file.n_embd == c.n_embd && file.n_head == c.n_head &&
                    file.block_size >= c.block_size && file.vocab_size <= c.vocab_size && c.bias,
                path, ": holds a GPT-2 of ", file.n_layer, " layers, ", file.n_head, " heads, width ", file.n_embd,
                ", context ", file.block_size, ", vocabulary ", file.vocab_size, "; the model has ", c.n_layer, ", ",
                c.n_head, ", ", c.n_embd, ", ", c.block_size, ", ", c.vocab_size, c.bias ? "" : " and no biases");
  std::map<std::string, Tensor> state = state_dict_from_hf_gpt2(tensors, c, path);
  for (auto& [name, t] : state) t = t.to(c.device);
  // A model holding some layers (a pipeline rank's) takes those; `state` has every tensor of the model.
  model.load_state_dict(state, /*strict=*/model.is_whole());
}

void load_hf_gpt2_sharded(GPT& model, const std::string& index_path) {
  load_hf_gpt2_indexed(model, read_hf_index(index_path));
}

void load_hf_gpt2_indexed(GPT& model, const HfIndex& index) {
  const std::string& index_path = index.path;
  if (model.is_whole()) {
    load_hf_gpt2(model, load_hf_shards(index), index_path);
    return;
  }
  // A pipeline rank's part: the names are checked on the whole weight map, the head count against
  // config.json, the shapes by load_state_dict; only the tensors of the part's layers are read.
  const GPTConfig& c = model.config();
  std::set<std::string> names;
  for (const auto& [name, shard] : index.weight_map)
    if (auto n = normalized_name(name)) names.insert(*n);
  check_names(names, c.n_layer, index_path);
  const std::optional<int64_t> n_head = config_json_n_head(index_path);
  BRIGADE_CHECK(!n_head || *n_head == c.n_head, index_path, ": its config.json gives ", n_head.value_or(0),
                " heads; the model has ", c.n_head);
  std::set<std::string> held, wanted;
  for (const auto& [name, t] : model.state_dict()) held.insert(name);
  for (const Name& n : names_of(c.n_layer))
    if (held.count(n.ours)) wanted.insert(n.hf);
  if (wanted.count("wte.weight")) wanted.insert("lm_head.weight");  // to check that it is tied
  const auto tensors = load_hf_shards(index, [&wanted](const std::string& name) {
    auto n = normalized_name(name);
    return n && wanted.count(*n) > 0;
  });
  std::map<std::string, Tensor> state = state_dict_from_hf_gpt2(tensors, c, index_path, &held);
  for (auto& [name, t] : state) t = t.to(c.device);
  model.load_state_dict(state);  // strict: every tensor the part holds
}

void save_hf_gpt2(const GPT& model, const std::string& path, int64_t vocab) {
  save_safetensors(path, hf_gpt2_from_state_dict(model.state_dict(), model.config().n_layer, vocab),
                   {{"format", "pt"}});
}

std::vector<std::string> save_hf_gpt2_dir(const GPT& model, const std::string& dir, int64_t max_shard_bytes,
                                          int64_t vocab) {
  const GPTConfig& c = model.config();
  std::filesystem::create_directories(dir);
  write_file_atomically((std::filesystem::path(dir) / "config.json").string(), hf_gpt2_config_json(c, vocab),
                        "save_hf_gpt2_dir " + dir);
  auto hf = hf_gpt2_from_state_dict(model.state_dict(), c.n_layer, vocab);
  // In the model's order (embeddings, block 0, block 1, ..., ln_f), so that a pipeline rank's layers
  // sit in few shards.
  std::vector<std::pair<std::string, Tensor>> ordered;
  for (const Name& n : names_of(c.n_layer)) ordered.emplace_back(n.hf, hf.at(n.hf));
  std::vector<std::string> written = save_hf_shards(dir, ordered, max_shard_bytes, {{"format", "pt"}});
  written.insert(written.begin(), "config.json");
  return written;
}

}  // namespace brigade::nn
