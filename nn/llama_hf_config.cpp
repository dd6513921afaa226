#include "nn/llama_hf_config.h"

#include <set>

#include "core/error.h"
#include "core/json.h"
#include "core/read_file.h"

namespace brigade::nn {

namespace {

// One config.json, read: its fields looked up by name with their types checked, every error
// starting with the file's name.
class ConfigFile {
 public:
  explicit ConfigFile(const std::string& path) : path_(path) {
    JsonLimits limits;
    limits.context = "'" + path + "'";
    limits.object_root = true;
    root_ = parse_json(read_file(path, "read_hf_llama_config"), limits);
  }

  // The member `key`, or null when it is absent or JSON null (transformers writes null for unset).
  const Json* find(const std::string& key) const { return find_in(root_, key); }
  static const Json* find_in(const Json& object, const std::string& key) {
    for (const auto& [k, v] : object.members)
      if (k == key) return v.kind == Json::Kind::null ? nullptr : &v;
    return nullptr;
  }

  int64_t whole(const Json& v, const std::string& key) const {
    BRIGADE_CHECK(v.kind == Json::Kind::number && v.integer && !v.negative && v.magnitude < (uint64_t(1) << 62), "'",
                  path_, "': ", key, " is not a whole number >= 0");
    return int64_t(v.magnitude);
  }
  int64_t whole(const std::string& key) const {
    const Json* v = find(key);
    BRIGADE_CHECK(v != nullptr, "'", path_, "': no ", key);
    return whole(*v, key);
  }
  int64_t whole(const std::string& key, int64_t otherwise) const {
    const Json* v = find(key);
    return v ? whole(*v, key) : otherwise;
  }
  double number(const Json& v, const std::string& key) const {
    BRIGADE_CHECK(v.kind == Json::Kind::number, "'", path_, "': ", key, " is not a number");
    return v.number;
  }
  double number(const std::string& key, double otherwise) const {
    const Json* v = find(key);
    return v ? number(*v, key) : otherwise;
  }
  bool flag(const std::string& key, bool otherwise) const {
    const Json* v = find(key);
    if (!v) return otherwise;
    BRIGADE_CHECK(v->kind == Json::Kind::boolean, "'", path_, "': ", key, " is not true or false");
    return v->boolean;
  }
  std::string text(const std::string& key, const std::string& otherwise) const {
    const Json* v = find(key);
    if (!v) return otherwise;
    BRIGADE_CHECK(v->kind == Json::Kind::string, "'", path_, "': ", key, " is not a string");
    return v->string;
  }
  // A token id, or the first of a list of them (LLaMA 3.1 lists several eos ids).
  std::optional<int64_t> token_id(const std::string& key) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (v->kind == Json::Kind::array) return v->items.empty() ? std::nullopt : std::optional(whole(v->items[0], key));
    return whole(*v, key);
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  Json root_;
};

// The rotary settings: transformers 4 writes rope_theta and rope_scaling (null, or an object with
// rope_type, older files "type"); transformers 5 writes one rope_parameters object holding
// rope_theta and rope_type with the scaling's fields beside them. Either way: no scaling, or LLaMA
// 3's; any other is refused.
RopeParams rope_of(const ConfigFile& file) {
  const std::string& path = file.path();
  RopeParams rope;
  rope.theta = file.number("rope_theta", 10000);
  const Json* parameters = file.find("rope_parameters");
  const std::string key = parameters ? "rope_parameters" : "rope_scaling";
  const Json* scaling = parameters ? parameters : file.find("rope_scaling");
  if (!scaling) return rope;
  BRIGADE_CHECK(scaling->kind == Json::Kind::object, "'", path, "': ", key, " is not an object or null");
  if (const Json* theta = ConfigFile::find_in(*scaling, "rope_theta")) rope.theta = file.number(*theta, key + ".rope_theta");
  const Json* type = ConfigFile::find_in(*scaling, "rope_type");
  if (!type) type = ConfigFile::find_in(*scaling, "type");
  BRIGADE_CHECK(type && type->kind == Json::Kind::string, "'", path, "': ", key, " has no rope_type (per-layer ",
                "rope settings are not supported)");
  if (type->string == "default") return rope;
  BRIGADE_CHECK(type->string == "llama3", "'", path, "': ", key, " type \"", type->string,
                "\" is not supported (brigade implements LLaMA 3's scaling, \"llama3\", and none)");
  RopeLlama3Scaling s;
  auto field = [&](const char* name) {
    const Json* v = ConfigFile::find_in(*scaling, name);
    BRIGADE_CHECK(v != nullptr, "'", path, "': ", key, " of type llama3 has no ", name);
    return file.number(*v, key + "." + name);
  };
  s.factor = field("factor");
  s.low_freq_factor = field("low_freq_factor");
  s.high_freq_factor = field("high_freq_factor");
  s.original_max_position_embeddings = field("original_max_position_embeddings");
  BRIGADE_CHECK(s.factor > 0 && s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor &&
                    s.original_max_position_embeddings > 0,
                "'", path, "': ", key, " needs factor > 0 and high_freq_factor > low_freq_factor > 0 (has ",
                s.factor, ", ", s.high_freq_factor, ", ", s.low_freq_factor, ")");
  rope.llama3 = s;
  return rope;
}

}  // namespace

std::string hf_model_type(const std::string& path) { return ConfigFile(path).text("model_type", ""); }

HfLlamaConfig read_hf_llama_config(const std::string& path) {
  const ConfigFile file(path);
  HfLlamaConfig out;
  out.model_type = file.text("model_type", "");
  static const std::set<std::string> families = {"llama", "mistral", "qwen2"};
  BRIGADE_CHECK(families.count(out.model_type), "'", path, "': model_type \"", out.model_type,
                "\" is not a LLaMA-family model brigade reads (llama, mistral, qwen2)");
  const bool qwen2 = out.model_type == "qwen2";

  GPTConfig& c = out.model;
  c.arch = Arch::llama;
  c.n_embd = file.whole("hidden_size");
  c.mlp_hidden = file.whole("intermediate_size");
  c.n_layer = file.whole("num_hidden_layers");
  c.n_head = file.whole("num_attention_heads");
  c.n_kv_head = file.whole("num_key_value_heads", c.n_head);
  c.vocab_size = file.whole("vocab_size");
  c.block_size = file.whole("max_position_embeddings", 2048);  // LlamaConfig's default
  BRIGADE_CHECK(c.n_embd > 0 && c.mlp_hidden > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_kv_head > 0 &&
                    c.vocab_size > 0 && c.block_size > 0,
                "'", path, "': hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, "
                "num_key_value_heads, vocab_size and max_position_embeddings must be positive");
  BRIGADE_CHECK(c.n_embd % c.n_head == 0, "'", path, "': num_attention_heads ", c.n_head,
                " does not divide hidden_size ", c.n_embd);
  BRIGADE_CHECK(c.n_head % c.n_kv_head == 0, "'", path, "': num_key_value_heads ", c.n_kv_head,
                " does not divide num_attention_heads ", c.n_head);
  if (const Json* head_dim = file.find("head_dim")) {
    const int64_t hd = file.whole(*head_dim, "head_dim");
    BRIGADE_CHECK(hd == c.n_embd / c.n_head, "'", path, "': head_dim ", hd, " is not hidden_size / num_attention_heads = ",
                  c.n_embd / c.n_head, " (brigade's attention projects to the model's width)");
  }
  c.norm_eps = file.number("rms_norm_eps", 1e-6);
  BRIGADE_CHECK(c.norm_eps > 0, "'", path, "': rms_norm_eps ", c.norm_eps, " is not positive");
  c.rope = rope_of(file);
  BRIGADE_CHECK(c.rope.theta > 0, "'", path, "': rope_theta ", c.rope.theta, " is not positive");
  c.tie_embeddings = file.flag("tie_word_embeddings", false);
  // qwen2's q, k and v always carry biases (its config has no switch for them).
  c.bias = qwen2 || file.flag("attention_bias", false);
  out.o_proj_bias = c.bias && !qwen2;
  BRIGADE_CHECK(!file.flag("mlp_bias", false), "'", path,
                "': mlp_bias is true; brigade's LLaMA MLP (gate, up, down) has no biases");
  const std::string act = file.text("hidden_act", "silu");
  BRIGADE_CHECK(act == "silu", "'", path, "': hidden_act \"", act, "\" is not \"silu\" (brigade's MLP is SwiGLU)");
  const bool window = file.flag("use_sliding_window", out.model_type == "mistral");
  if (const Json* sliding = window ? file.find("sliding_window") : nullptr) {
    const int64_t w = file.whole(*sliding, "sliding_window");
    BRIGADE_CHECK(w >= c.block_size, "'", path, "': sliding_window ", w, " is shorter than max_position_embeddings ",
                  c.block_size, "; brigade's attention sees the whole context");
  }
  out.bos_token_id = file.token_id("bos_token_id");
  out.eos_token_id = file.token_id("eos_token_id");
  return out;
}

std::string hf_llama_config_json(const GPTConfig& c, int64_t vocab, std::optional<int64_t> bos_token_id,
                                 std::optional<int64_t> eos_token_id) {
  BRIGADE_CHECK(c.arch == Arch::llama, "hf_llama_config_json: the model is not a llama");
  const int64_t kv = c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
  std::string rope_scaling = "null";
  if (c.rope.llama3) {
    const RopeLlama3Scaling& s = *c.rope.llama3;
    rope_scaling = "{\"rope_type\": \"llama3\", \"factor\": " + json_number(s.factor) +
                   ", \"low_freq_factor\": " + json_number(s.low_freq_factor) +
                   ", \"high_freq_factor\": " + json_number(s.high_freq_factor) +
                   ", \"original_max_position_embeddings\": " + json_number(s.original_max_position_embeddings) + "}";
  }
  auto id = [](std::optional<int64_t> v) { return v ? std::to_string(*v) : std::string("null"); };
  auto boolean = [](bool v) { return std::string(v ? "true" : "false"); };
  return std::string("{\n") +                                       //
         "  \"architectures\": [\"LlamaForCausalLM\"],\n" +          //
         "  \"model_type\": \"llama\",\n" +                          //
         "  \"torch_dtype\": \"float32\",\n" +                       //
         "  \"vocab_size\": " + std::to_string(vocab > 0 ? vocab : c.vocab_size) + ",\n" +
         "  \"hidden_size\": " + std::to_string(c.n_embd) + ",\n" +
         "  \"intermediate_size\": " + std::to_string(c.mlp_hidden) + ",\n" +
         "  \"num_hidden_layers\": " + std::to_string(c.n_layer) + ",\n" +
         "  \"num_attention_heads\": " + std::to_string(c.n_head) + ",\n" +
         "  \"num_key_value_heads\": " + std::to_string(kv) + ",\n" +
         "  \"head_dim\": " + std::to_string(c.n_embd / c.n_head) + ",\n" +
         "  \"hidden_act\": \"silu\",\n" +
         "  \"max_position_embeddings\": " + std::to_string(c.block_size) + ",\n" +
         "  \"rms_norm_eps\": " + json_number(c.norm_eps) + ",\n" +
         "  \"rope_theta\": " + json_number(c.rope.theta) + ",\n" +
         "  \"rope_scaling\": " + rope_scaling + ",\n" +
         "  \"attention_bias\": " + boolean(c.bias) + ",\n" +
         "  \"mlp_bias\": false,\n" +
         "  \"tie_word_embeddings\": " + boolean(c.tie_embeddings) + ",\n" +
         "  \"bos_token_id\": " + id(bos_token_id) + ",\n" +
         "  \"eos_token_id\": " + id(eos_token_id) + "\n}\n";
}

}  // namespace brigade::nn
