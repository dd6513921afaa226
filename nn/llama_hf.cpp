#include "nn/llama_hf.h"

#include <cstring>
#include <filesystem>
#include <map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "kernels/ops.h"

namespace brigade::nn {

namespace fs = std::filesystem;

namespace {

// One tensor's two names and its shape in a file of `config`'s sizes.
struct Name {
  std::string hf, ours;
  Shape shape;
};

// Every tensor a Hugging Face file of `c` holds, in the model's order (so that a pipeline rank's
// layers sit in few shards when written). `o_bias`: the file has o_proj.bias (qwen2's does not).
std::vector<Name> names_of(const GPTConfig& c, bool o_bias) {
  const int64_t C = c.n_embd, V = c.vocab_size, I = c.mlp_hidden, hd = c.n_embd / c.n_head;
  const int64_t q = c.n_head * hd, kv = (c.n_kv_head > 0 ? c.n_kv_head : c.n_head) * hd;
  std::vector<Name> names = {{"model.embed_tokens.weight", "embed.wte.weight", {V, C}}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "model.layers." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".";
    names.push_back({h + "input_layernorm.weight", b + "ln1.weight", {C}});
    const std::pair<const char*, Shape> projections[] = {{"q", {q, C}}, {"k", {kv, C}}, {"v", {kv, C}}, {"o", {C, q}}};
    for (const auto& [p, shape] : projections) {
      const std::string hf = h + "self_attn." + p + "_proj.", ours = b + "attn." + p + ".";
      names.push_back({hf + "weight", ours + "weight", shape});
      if (c.bias && (std::string(p) != "o" || o_bias)) names.push_back({hf + "bias", ours + "bias", {shape[0]}});
    }
    names.push_back({h + "post_attention_layernorm.weight", b + "ln2.weight", {C}});
    names.push_back({h + "mlp.gate_proj.weight", b + "mlp.gate.weight", {I, C}});
    names.push_back({h + "mlp.up_proj.weight", b + "mlp.up.weight", {I, C}});
    names.push_back({h + "mlp.down_proj.weight", b + "mlp.down.weight", {C, I}});
  }
  names.push_back({"model.norm.weight", "head.ln_f.weight", {C}});
  if (!c.tie_embeddings) names.push_back({"lm_head.weight", "head.lm_head.weight", {V, C}});
  return names;
}

// Buffers older files carry that are not weights.
bool is_buffer(const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }

// The token-table rows (embed_tokens, lm_head): the model may have more than the file (padding).
bool has_vocab_rows(const std::string& ours) {
  return ours == "embed.wte.weight" || ours == "head.lm_head.weight";
}

// The shape of every tensor of `index`, from the shards' headers; a tensor the index puts in a shard
// that does not hold it is an error naming both.
std::map<std::string, Shape> shapes_in(const HfIndex& index) {
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : index.weight_map) by_shard[shard].push_back(name);
  std::map<std::string, Shape> shapes;
  for (const auto& [shard, names] : by_shard) {
    const std::string path = (fs::path(index.dir) / shard).string();
    const SafetensorsHeader header = read_safetensors_header(path);
    for (const std::string& name : names) {
      auto it = header.tensors.find(name);
      BRIGADE_CHECK(it != header.tensors.end(), "'", index.path, "': the index puts '", name, "' in ", shard,
                    ", which does not hold it");
      shapes[name] = it->second.shape;
    }
  }
  return shapes;
}

// Names and shapes of the whole file against what its config.json implies.
void check_tensors(const HfLlamaFiles& files) {
  const HfIndex& index = files.index;
  const std::map<std::string, Shape> shapes = shapes_in(index);
  const GPTConfig& c = files.config.model;
  std::map<std::string, const Name*> expected;
  const std::vector<Name> names = names_of(c, files.config.o_proj_bias);
  for (const Name& n : names) expected[n.hf] = &n;
  const std::string sizes = "config.json '" + files.config_path + "': " + std::to_string(c.n_layer) + " layers, hidden " +
                            std::to_string(c.n_embd) + ", " + std::to_string(c.n_head) + " heads, " +
                            std::to_string(c.n_kv_head) + " key/value heads, intermediate " +
                            std::to_string(c.mlp_hidden) + ", vocabulary " + std::to_string(c.vocab_size) +
                            (c.bias ? ", attention_bias" : "") + (c.tie_embeddings ? ", tied embeddings" : "");
  for (const Name& n : names)
    BRIGADE_CHECK(shapes.count(n.hf), "'", index.path, "': no tensor '", n.hf, "', which the model of ", sizes, " has");
  for (const auto& [name, shape] : shapes) {
    const std::string file = (fs::path(index.dir) / index.weight_map.at(name)).string();
    if (is_buffer(name)) continue;
    if (name == "lm_head.weight" && c.tie_embeddings) {  // tied, but written all the same
      BRIGADE_CHECK(shape == Shape({c.vocab_size, c.n_embd}), "'", file, "': tensor 'lm_head.weight' is ",
                    shape_str(shape), "; ", sizes, " gives ", shape_str(Shape({c.vocab_size, c.n_embd})));
      continue;
    }
    auto it = expected.find(name);
    BRIGADE_CHECK(it != expected.end(), "'", file, "': tensor '", name, "' is not part of the model of ", sizes);
    BRIGADE_CHECK(shape == it->second->shape, "'", file, "': tensor '", name, "' is ", shape_str(shape), "; ", sizes,
                  " gives ", shape_str(it->second->shape));
  }
}

std::string rope_str(const RopeParams& r) {
  std::string s = "rope_theta " + json_number(r.theta);
  if (r.llama3)
    s += ", llama3 scaling (factor " + json_number(r.llama3->factor) + ", low " +
         json_number(r.llama3->low_freq_factor) + ", high " + json_number(r.llama3->high_freq_factor) +
         ", original context " + json_number(r.llama3->original_max_position_embeddings) + ")";
  return s;
}

bool same_rope(const RopeParams& a, const RopeParams& b) {
  if (a.theta != b.theta || a.llama3.has_value() != b.llama3.has_value()) return false;
  if (!a.llama3) return true;
  const RopeLlama3Scaling &x = *a.llama3, &y = *b.llama3;
  return x.factor == y.factor && x.low_freq_factor == y.low_freq_factor && x.high_freq_factor == y.high_freq_factor &&
         x.original_max_position_embeddings == y.original_max_position_embeddings;
}

// The model computes what the file's configuration does: the family, the layer count, the head
// counts, the tie, the biases, the norm's epsilon and the rotary settings. (Widths are checked tensor
// by tensor against the model's own parameters; the context may differ: rotary positions have no
// table in the weights.)
void check_model_fits(const GPTConfig& m, const HfLlamaConfig& file, const std::string& path) {
  const GPTConfig& f = file.model;
  const int64_t m_kv = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
  BRIGADE_CHECK(m.arch == Arch::llama, "'", path, "' holds a ", file.model_type, " model; this model is a GPT-2");
  BRIGADE_CHECK(m.n_layer == f.n_layer && m.n_head == f.n_head && m_kv == f.n_kv_head && m.n_embd == f.n_embd, "'",
                path, "' describes ", f.n_layer, " layers of width ", f.n_embd, " with ", f.n_head, " heads and ",
                f.n_kv_head, " key/value heads; the model has ", m.n_layer, ", ", m.n_embd, ", ", m.n_head, " and ", m_kv);
  BRIGADE_CHECK(m.tie_embeddings == f.tie_embeddings, "'", path, "': tie_word_embeddings is ",
                f.tie_embeddings ? "true" : "false", "; the model's head is ", m.tie_embeddings ? "tied" : "untied");
  BRIGADE_CHECK(m.bias == f.bias, "'", path, "': the attention ", f.bias ? "has" : "has no",
                " biases; the model's ", m.bias ? "has" : "has none");
  BRIGADE_CHECK(m.norm_eps == f.norm_eps, "'", path, "': rms_norm_eps is ", f.norm_eps, "; the model's ", m.norm_eps);
  BRIGADE_CHECK(same_rope(m.rope, f.rope), "'", path, "': ", rope_str(f.rope), "; the model has ", rope_str(m.rope));
}

}  // namespace

bool is_hf_llama(const std::set<std::string>& names) {
  return names.count("model.embed_tokens.weight") && names.count("model.layers.0.self_attn.q_proj.weight");
}

HfLlamaFiles read_hf_llama_files(const HfIndex& index) {
  HfLlamaFiles files;
  files.config_path = (fs::path(index.path).parent_path() / "config.json").string();
  std::error_code ec;
  BRIGADE_CHECK(fs::is_regular_file(files.config_path, ec), "'", index.path,
                "': no config.json beside it (a LLaMA's head counts, epsilon and rotary settings are there)");
  files.config = read_hf_llama_config(files.config_path);
  files.index = index;
  return files;
}

void load_hf_llama(GPT& model, const HfLlamaFiles& files) {
  const GPTConfig& c = model.config();
  check_model_fits(c, files.config, files.config_path);
  check_tensors(files);
  const std::vector<Name> names = names_of(files.config.model, files.config.o_proj_bias);
  const std::map<std::string, Tensor> mine = model.state_dict();
  std::map<std::string, const Name*> by_ours;
  for (const Name& n : names) by_ours[n.ours] = &n;
  std::set<std::string> wanted;
  for (const auto& [ours, t] : mine)
    if (by_ours.count(ours)) wanted.insert(by_ours.at(ours)->hf);
  const bool check_tie = c.tie_embeddings && wanted.count("model.embed_tokens.weight");
  if (check_tie) wanted.insert("lm_head.weight");
  const auto tensors = load_hf_shards(files.index, [&](const std::string& name) { return wanted.count(name) > 0; });
  if (check_tie && tensors.count("lm_head.weight")) {
    const Tensor &head = tensors.at("lm_head.weight"), &wte = tensors.at("model.embed_tokens.weight");
    const bool same = head.dtype() == wte.dtype() && std::memcmp(head.raw_data(), wte.raw_data(), head.nbytes()) == 0;
    BRIGADE_CHECK(same, "'", files.index.path, "': lm_head.weight differs from model.embed_tokens.weight although ",
                  "config.json ties them");
  }
  std::map<std::string, Tensor> state;
  for (const auto& [ours, want] : mine) {
    auto n = by_ours.find(ours);
    if (n == by_ours.end()) {
      // The o bias of a qwen2 file (q, k and v biases only) is zero; anything else has no counterpart.
      BRIGADE_CHECK(ours.ends_with(".attn.o.bias") && !files.config.o_proj_bias, "'", files.index.path,
                    "': the model has '", ours, "', which the file has no tensor for");
      state[ours] = zeros(want.shape(), c.dtype, c.device);
      continue;
    }
    Tensor t = tensors.at(n->second->hf).to(c.dtype).contiguous();
    const bool padded = has_vocab_rows(ours) && want.dim() == 2 && t.shape()[0] < want.shape()[0] &&
                        t.shape()[1] == want.shape()[1];
    if (padded) {  // a padded vocabulary: the file's rows, then zeros (tokens no tokenizer produces)
      Tensor rows = zeros(want.shape(), c.dtype);
      ops::copy_(rows.slice(0, 0, t.shape()[0]), t);
      t = rows;
    }
    BRIGADE_CHECK(t.shape() == want.shape(), "'", files.index.path, "': tensor '", n->second->hf, "' is ",
                  shape_str(t.shape()), "; the model's '", ours, "' is ", shape_str(want.shape()));
    state[ours] = t.to(c.device);
  }
  model.load_state_dict(state);  // strict: every tensor the model holds
}

std::vector<std::string> save_hf_llama_dir(const GPT& model, const std::string& dir, int64_t max_shard_bytes,
                                           int64_t vocab, std::optional<int64_t> bos_token_id,
                                           std::optional<int64_t> eos_token_id) {
  const GPTConfig& c = model.config();
  BRIGADE_CHECK(c.arch == Arch::llama, "save_hf_llama_dir ", dir, ": the model is not a llama");
  BRIGADE_CHECK(model.is_whole(), "save_hf_llama_dir ", dir, ": the model holds only some layers");
  BRIGADE_CHECK(vocab <= c.vocab_size, "save_hf_llama_dir ", dir, ": vocab ", vocab, " is larger than the model's ",
                c.vocab_size);
  const std::map<std::string, Tensor> state = model.state_dict();
  GPTConfig file = c;
  if (vocab > 0) file.vocab_size = vocab;
  if (file.n_kv_head == 0) file.n_kv_head = file.n_head;
  if (file.mlp_hidden == 0) file.mlp_hidden = state.at("blocks.0.mlp.gate.weight").size(0);
  std::vector<std::pair<std::string, Tensor>> ordered;
  for (const Name& n : names_of(file, /*o_bias=*/true)) {
    auto it = state.find(n.ours);
    BRIGADE_CHECK(it != state.end(), "save_hf_llama_dir ", dir, ": the model has no '", n.ours, "'");
    Tensor t = it->second.to(Device::cpu()).to(DType::f32);
    if (has_vocab_rows(n.ours)) t = t.slice(0, 0, file.vocab_size);
    BRIGADE_CHECK(t.shape() == n.shape, "save_hf_llama_dir ", dir, ": '", n.ours, "' is ", shape_str(t.shape()),
                  ", not ", shape_str(n.shape));
    ordered.emplace_back(n.hf, t.contiguous());
  }
  fs::create_directories(dir);
  write_file_atomically((fs::path(dir) / "config.json").string(),
                        hf_llama_config_json(file, 0, bos_token_id, eos_token_id), "save_hf_llama_dir " + dir);
  std::vector<std::string> written = save_hf_shards(dir, ordered, max_shard_bytes, {{"format", "pt"}});
  written.insert(written.begin(), "config.json");
  return written;
}

}  // namespace brigade::nn
