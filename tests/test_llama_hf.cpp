// nn/llama_hf.h, nn/hf_model.h and `brigade generate --prompt-ids --ids`: a LLaMA directory in
// Hugging Face's layout, written by the test (tests/llama_hf_reference.h), loads into an nn::GPT
// whose logits equal the test's own f64 forward pass; it writes back to the same tensors and
// config.json fields; what brigade cannot hold is refused naming the file and the tensor or field;
// and the CLI's greedy tokens equal the reference's, with and without the KV cache, on one device
// and across two pipeline stages.
#include "test_util.h"
#include "cli_run.h"

#include <filesystem>
#include <fstream>

#include "core/factory.h"
#include "core/json.h"
#include "core/read_file.h"
#include "core/safetensors.h"
#include "data/token_shard.h"
#include "export/command.h"
#include "generate/command.h"
#include "grammar_text.h"
#include "llama_hf_reference.h"
#include "nn/hf_model.h"
#include "nn/llama_hf.h"
#include "temp_dir.h"
#include "train/options.h"
#include "train/trainer.h"

using namespace brigade;
using Catch::Contains;
using test::TempDir;
using test::TinyLlama;
using test::Weights;

namespace {

// config.json of `m` as transformers writes it, with `changes` (key -> JSON text; "" removes the key).
std::string config_json(const TinyLlama& m, const std::string& model_type,
                        const std::map<std::string, std::string>& changes = {}) {
  std::map<std::string, std::string> f = {
      {"architectures", "[\"LlamaForCausalLM\"]"},
      {"model_type", "\"" + model_type + "\""},
      {"vocab_size", std::to_string(m.vocab)},
      {"hidden_size", std::to_string(m.hidden)},
      {"intermediate_size", std::to_string(m.intermediate)},
      {"num_hidden_layers", std::to_string(m.layers)},
      {"num_attention_heads", std::to_string(m.heads)},
      {"num_key_value_heads", std::to_string(m.kv_heads)},
      {"head_dim", std::to_string(m.head_dim())},
      {"max_position_embeddings", std::to_string(m.context)},
      {"rms_norm_eps", json_number(m.eps)},
      {"rope_theta", json_number(m.theta)},
      {"rope_scaling", m.llama3 ? "{\"rope_type\": \"llama3\", \"factor\": " + json_number(m.factor) +
                                      ", \"low_freq_factor\": " + json_number(m.low_freq_factor) +
                                      ", \"high_freq_factor\": " + json_number(m.high_freq_factor) +
                                      ", \"original_max_position_embeddings\": " + json_number(m.original_context) + "}"
                                : "null"},
      {"tie_word_embeddings", m.tied ? "true" : "false"},
      {"hidden_act", "\"silu\""},
      {"torch_dtype", "\"float32\""},
      {"bos_token_id", "1"},
      {"eos_token_id", "[2, 3]"},
  };
  if (model_type != "qwen2") f["attention_bias"] = m.attention_bias ? "true" : "false";
  if (model_type != "qwen2") f["mlp_bias"] = "false";
  for (const auto& [key, value] : changes) {
    if (value.empty()) f.erase(key);
    else f[key] = value;
  }
  std::string out = "{";
  for (const auto& [key, value] : f) out += (out.size() > 1 ? ",\n  " : "\n  ") + json_string(key) + ": " + value;
  return out + "\n}\n";
}

Tensor tensor_of(const test::Weight& w) { return from_vector(w.values, Shape(w.shape), DType::f32); }

// Writes `weights` into `dir` as one model.safetensors, or (sharded) as two shards and the index
// spelled out by hand, and config.json.
void write_model(const std::string& dir, const std::string& config, const Weights& weights, bool sharded) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config;
  if (!sharded) {
    std::map<std::string, Tensor> all;
    for (const auto& [name, w] : weights) all[name] = tensor_of(w);
    save_safetensors(dir + "/model.safetensors", all, {{"format", "pt"}});
    return;
  }
  // Layers 0 and the embedding in the first shard, the rest in the second.
  std::map<std::string, Tensor> shard[2];
  std::string map;
  for (const auto& [name, w] : weights) {
    const int i = name.starts_with("model.layers.0.") || name == "model.embed_tokens.weight" ? 0 : 1;
    shard[i][name] = tensor_of(w);
    map += std::string(map.empty() ? "" : ", ") + json_string(name) + ": \"model-0000" + std::to_string(i + 1) +
           "-of-00002.safetensors\"";
  }
  for (int i = 0; i < 2; ++i)
    save_safetensors(dir + "/model-0000" + std::to_string(i + 1) + "-of-00002.safetensors", shard[i], {{"format", "pt"}});
  std::ofstream(dir + "/model.safetensors.index.json") << "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {" << map
                                                       << "}}";
}

std::shared_ptr<nn::GPT> load(const std::string& path) {
  const std::optional<nn::HfModel> hf = nn::find_hf_model(path);
  REQUIRE(hf.has_value());
  REQUIRE(hf->family == nn::Arch::llama);
  auto model = std::make_shared<nn::GPT>(nn::hf_model_config(*hf));
  nn::load_hf_model(*model, *hf);
  return model;
}

const std::vector<int64_t> kTokens = {5, 17, 0, 36, 9, 9, 23, 4, 30, 12, 1};

void require_reference_logits(const nn::GPT& model, const TinyLlama& m, const Weights& w) {
  std::vector<double> ids(kTokens.begin(), kTokens.end());
  const Tensor logits = const_cast<nn::GPT&>(model).forward(from_vector(ids, {1, int64_t(ids.size())}, DType::i64));
  std::vector<double> want;
  for (const auto& row : test::reference_logits(m, w, kTokens)) want.insert(want.end(), row.begin(), row.end());
  test::require_close(logits, want, 2e-5, 2e-5);
}

std::string error_loading(const std::string& dir) {
  return test::error_of([&] { load(dir); });
}

}  // namespace

TEST_CASE("llama_hf: a LLaMA in Hugging Face's layout gives the f64 reference's logits", "[checkpoint][llama_hf]") {
  TempDir dir("brigade_test_llama_hf");
  SECTION("GQA, untied head, llama3 rope scaling; one file, and shards") {
    const TinyLlama m;
    Weights w = test::make_weights(m, 7);
    for (bool sharded : {false, true}) {
      INFO((sharded ? "sharded" : "one file"));
      const std::string d = dir.file(sharded ? "sharded" : "single");
      Weights with_buffer = w;  // older files carry rotary buffers, which are not weights
      with_buffer["model.layers.1.self_attn.rotary_emb.inv_freq"] = {{m.head_dim() / 2}, {1, 0.5, 0.25, 0.125}};
      write_model(d, config_json(m, "llama"), sharded ? w : with_buffer, sharded);
      const auto model = load(d);
      const nn::GPTConfig& c = model->config();
      REQUIRE(c.n_kv_head == 2);
      REQUIRE(!c.tie_embeddings);
      REQUIRE(c.rope.llama3.has_value());
      REQUIRE(c.norm_eps == m.eps);
      require_reference_logits(*model, m, w);
    }
    // transformers 5 writes the rotary settings as one rope_parameters object.
    const std::string v5 = config_json(
        m, "llama",
        {{"rope_theta", ""},
         {"rope_scaling", ""},
         {"rope_parameters", "{\"rope_type\": \"llama3\", \"rope_theta\": " + json_number(m.theta) +
                                 ", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                                 "\"original_max_position_embeddings\": 64}"}});
    write_model(dir.file("v5"), v5, w, false);
    require_reference_logits(*load(dir.file("v5")), m, w);
  }
  SECTION("qwen2: tied head, q/k/v biases without an o bias, no rope scaling, multi-query") {
    TinyLlama m;
    m.tied = true;
    m.attention_bias = true;
    m.o_bias = false;
    m.llama3 = false;
    m.kv_heads = 1;
    m.theta = 500;
    const Weights w = test::make_weights(m, 11);
    write_model(dir.file("qwen2"), config_json(m, "qwen2", {{"use_sliding_window", "false"}}), w, false);
    require_reference_logits(*load(dir.file("qwen2")), m, w);
  }
}

TEST_CASE("llama_hf: loaded and written back, the tensors and config.json are the original's",
          "[checkpoint][llama_hf]") {
  TempDir dir("brigade_test_llama_hf_round");
  const TinyLlama m;
  const Weights w = test::make_weights(m, 3);
  write_model(dir.file("in"), config_json(m, "llama"), w, false);
  const auto model = load(dir.file("in"));
  // Small shards, so that the index is written too.
  const std::vector<std::string> files = nn::save_hf_llama_dir(*model, dir.file("out"), 20000);
  REQUIRE(files.front() == "config.json");
  REQUIRE(files.back() == "model.safetensors.index.json");
  const auto back = nn::load_hf_shards(nn::read_hf_index(dir.file("out/model.safetensors.index.json")));
  REQUIRE(back.size() == w.size());
  for (const auto& [name, weight] : w) {
    INFO(name);
    REQUIRE(back.count(name));
    test::require_equal(back.at(name), tensor_of(weight));
  }
  JsonLimits limits;
  const Json config = parse_json(read_file(dir.file("out/config.json"), "test"), limits);
  REQUIRE(config["architectures"][0].string == "LlamaForCausalLM");
  REQUIRE(config["model_type"].string == "llama");
  REQUIRE(config["torch_dtype"].string == "float32");
  const std::pair<const char*, double> numbers[] = {
      {"vocab_size", double(m.vocab)},         {"hidden_size", double(m.hidden)},
      {"intermediate_size", double(m.intermediate)}, {"num_hidden_layers", double(m.layers)},
      {"num_attention_heads", double(m.heads)}, {"num_key_value_heads", double(m.kv_heads)},
      {"head_dim", double(m.head_dim())},      {"max_position_embeddings", double(m.context)},
      {"rms_norm_eps", m.eps},                 {"rope_theta", m.theta}};
  for (const auto& [key, value] : numbers) {
    INFO(key);
    REQUIRE(config[key].as_number() == value);
  }
  REQUIRE(config["rope_scaling"]["rope_type"].string == "llama3");
  REQUIRE(config["rope_scaling"]["factor"].as_number() == m.factor);
  REQUIRE(config["rope_scaling"]["low_freq_factor"].as_number() == m.low_freq_factor);
  REQUIRE(config["rope_scaling"]["high_freq_factor"].as_number() == m.high_freq_factor);
  REQUIRE(config["rope_scaling"]["original_max_position_embeddings"].as_number() == m.original_context);
  REQUIRE(config["tie_word_embeddings"].kind == Json::Kind::boolean);
  REQUIRE(!config["tie_word_embeddings"].boolean);
  REQUIRE(!config["attention_bias"].boolean);
  REQUIRE(!config["mlp_bias"].boolean);
  // And it reads back as the same model.
  require_reference_logits(*load(dir.file("out")), m, w);
  // Into a padded vocabulary (40 rows for the file's 37): the file's rows, then zeros; written back
  // with its first 37 rows, the original tensors.
  nn::GPTConfig padded_config = model->config();
  padded_config.vocab_size = 40;
  nn::GPT padded(padded_config);
  nn::load_hf_model(padded, *nn::find_hf_model(dir.file("in")));
  for (const char* name : {"embed.wte.weight", "head.lm_head.weight"}) {
    INFO(name);
    const Tensor t = padded.state_dict().at(name);
    test::require_equal(t.slice(0, 0, m.vocab).contiguous(), model->state_dict().at(name));
    test::require_equal(t.slice(0, m.vocab, 40).contiguous(), zeros({3, m.hidden}, DType::f32));
  }
  nn::save_hf_llama_dir(padded, dir.file("unpadded"), 1 << 30, m.vocab);
  const auto unpadded = load_safetensors(dir.file("unpadded/model.safetensors")).tensors;
  for (const auto& [name, weight] : w) test::require_equal(unpadded.at(name), tensor_of(weight));
  // `brigade export` of the directory writes the same files: one model.safetensors when they fit.
  const auto [status, out] =
      test::run_cli(export_cli::export_command, {"--checkpoint", dir.file("in"), "--out", dir.file("exported")});
  REQUIRE(status == 0);
  REQUIRE_THAT(out, Contains("exported a LLaMA of 2 layers"));
  const auto exported = load_safetensors(dir.file("exported/model.safetensors")).tensors;
  REQUIRE(exported.size() == w.size());
  for (const auto& [name, weight] : w) test::require_equal(exported.at(name), tensor_of(weight));
  REQUIRE(read_file(dir.file("exported/config.json"), "test") == read_file(dir.file("out/config.json"), "test"));
}

TEST_CASE("llama_hf: what brigade cannot hold is refused, naming the file and the tensor or field",
          "[checkpoint][llama_hf]") {
  TempDir dir("brigade_test_llama_hf_refusals");
  const TinyLlama m;
  const Weights w = test::make_weights(m, 5);
  const std::string config_file = dir.file("d/config.json");
  SECTION("rope_scaling of type yarn") {
    write_model(dir.file("d"), config_json(m, "llama", {{"rope_scaling", R"({"rope_type": "yarn", "factor": 4})"}}), w,
                false);
    const std::string e = error_loading(dir.file("d"));
    REQUIRE_THAT(e, Contains(config_file) && Contains("rope_scaling type \"yarn\" is not supported"));
  }
  SECTION("mlp_bias true") {
    write_model(dir.file("d"), config_json(m, "llama", {{"mlp_bias", "true"}}), w, false);
    REQUIRE_THAT(error_loading(dir.file("d")), Contains(config_file) && Contains("mlp_bias is true"));
  }
  SECTION("a head_dim other than hidden / heads") {
    write_model(dir.file("d"), config_json(m, "llama", {{"head_dim", "16"}}), w, false);
    REQUIRE_THAT(error_loading(dir.file("d")), Contains(config_file) && Contains("head_dim 16"));
  }
  SECTION("another model type") {
    write_model(dir.file("d"), config_json(m, "phi3"), w, false);
    REQUIRE_THAT(error_loading(dir.file("d")), Contains(config_file) && Contains("model_type \"phi3\""));
  }
  SECTION("a missing tensor") {
    for (bool sharded : {false, true}) {
      Weights less = w;
      less.erase("model.layers.1.mlp.up_proj.weight");
      const std::string d = dir.file(sharded ? "sharded" : "single");
      write_model(d, config_json(m, "llama"), less, sharded);
      const std::string file = sharded ? d + "/model.safetensors.index.json" : d + "/model.safetensors";
      REQUIRE_THAT(error_loading(d), Contains(file) && Contains("no tensor 'model.layers.1.mlp.up_proj.weight'"));
    }
  }
  SECTION("an unexpected tensor") {
    Weights more = w;
    more["model.layers.2.mlp.up_proj.weight"] = w.at("model.layers.1.mlp.up_proj.weight");
    write_model(dir.file("d"), config_json(m, "llama"), more, true);
    REQUIRE_THAT(error_loading(dir.file("d")), Contains(dir.file("d/model-00002-of-00002.safetensors")) &&
                                                   Contains("'model.layers.2.mlp.up_proj.weight' is not part"));
  }
  SECTION("a shape that does not match config.json") {
    Weights wrong = w;
    wrong["model.layers.1.self_attn.k_proj.weight"] = w.at("model.layers.1.self_attn.q_proj.weight");  // [32, 32]
    write_model(dir.file("d"), config_json(m, "llama"), wrong, true);
    REQUIRE_THAT(error_loading(dir.file("d")),
                 Contains(dir.file("d/model-00002-of-00002.safetensors")) &&
                     Contains("tensor 'model.layers.1.self_attn.k_proj.weight' is [32, 32]") && Contains("[16, 32]"));
  }
  SECTION("no config.json") {
    write_model(dir.file("d"), config_json(m, "llama"), w, false);
    std::filesystem::remove(config_file);
    REQUIRE_THAT(error_loading(dir.file("d")), Contains(dir.file("d/model.safetensors")) && Contains("no config.json"));
  }
}

namespace {

// `brigade generate args`: the first line it printed (the ids), or what it said on failure.
std::string generate(const std::vector<std::string>& args, int status = 0) {
  std::string err;
  const auto [got, out] = test::run_cli(generate_cli::generate_command, args, &err);
  INFO(out << err);
  REQUIRE(got == status);
  if (status != 0) return err;
  return out.substr(0, out.find('\n'));
}

}  // namespace

TEST_CASE("llama_hf: brigade generate --prompt-ids --ids continues as the reference does, cached or not, on "
          "one device or two stages",
          "[generate][llama_hf]") {
  TempDir dir("brigade_test_llama_hf_generate");
  const TinyLlama m;
  const Weights w = test::make_weights(m, 7);
  write_model(dir.file("d"), config_json(m, "llama"), w, true);
  const std::vector<int64_t> prompt = {5, 17, 0, 36};
  std::string want;
  for (int64_t id : test::reference_greedy(m, w, prompt, 12)) want += (want.empty() ? "" : " ") + std::to_string(id);
  const std::vector<std::string> base = {"--checkpoint", dir.file("d"), "--prompt-ids", "5 17 0 36", "--ids",
                                         "--tokens", "12", "--temperature", "0", "--device", "cpu"};
  for (const std::vector<std::string>& more : std::vector<std::vector<std::string>>{
           {}, {"--no-cache"}, {"--stages", "2"}, {"--stages", "2", "--no-cache"}}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    INFO(more.size());
    REQUIRE(generate(args) == want);
  }
  // Bad prompts, and no tokenizer for text.
  REQUIRE_THAT(generate({"--checkpoint", dir.file("d"), "--prompt-ids", "5 x", "--ids"}, 2),
               Contains("--prompt-ids: expected a whole number, got 'x'"));
  REQUIRE_THAT(generate({"--checkpoint", dir.file("d"), "--prompt-ids", "5 37", "--ids", "--device", "cpu"}, 1),
               Contains("token 37 is not in") && Contains("vocabulary of 37"));
  REQUIRE_THAT(generate({"--checkpoint", dir.file("d"), "--prompt-ids", "5", "--device", "cpu"}, 1),
               Contains("carries no tokenizer"));
}

TEST_CASE("llama_hf: brigade train --init-from a LLaMA directory starts from its weights, and refuses other "
          "rotary settings",
          "[train][llama_hf]") {
  TempDir dir("brigade_test_llama_hf_train");
  std::filesystem::create_directories(dir.file("data"));
  data::write_token_shard(dir.file("data/train_000000.bin"), test::grammar_text(20000, 1), data::TokenWidth::u16);
  data::write_token_shard(dir.file("data/val_000000.bin"), test::grammar_text(3000, 2), data::TokenWidth::u16);
  auto options = [&](std::vector<std::string> more) {
    std::vector<std::string> args = {"--data", dir.file("data"), "--vocab", "256", "--context", "32", "--arch", "llama",
                                     "--layers", "2", "--heads", "4", "--kv-heads", "2", "--embd", "32",
                                     "--mlp-hidden", "64", "--untied", "--batch", "8", "--steps", "3", "--warmup", "1",
                                     "--eval", "8", "--device", "cpu", "--trace", "none", "--svg", "none"};
    args.insert(args.end(), more.begin(), more.end());
    return train::parse_train_args(args).options;
  };
  train::Trainer trained(options({}));
  while (trained.step() < 3) trained.train_step();
  nn::save_hf_llama_dir(trained.model(), dir.file("hf"), 30000);  // in shards
  train::Trainer started(options({"--init-from", dir.file("hf")}));
  REQUIRE(started.step() == 0);
  const auto want = trained.model().state_dict(), got = started.model().state_dict();
  REQUIRE(got.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    test::require_equal(got.at(name), t);
  }
  // `brigade export` of the run's own checkpoint writes the LLaMA layout, holding the same weights.
  trained.save(dir.file("ckpt"));
  const auto [status, out] =
      test::run_cli(export_cli::export_command, {"--checkpoint", dir.file("ckpt"), "--out", dir.file("exported")});
  REQUIRE(status == 0);
  REQUIRE_THAT(out, Contains("exported a LLaMA of 2 layers, 4 heads, width 32"));
  const auto exported = load(dir.file("exported"))->state_dict();
  for (const auto& [name, t] : want) {
    INFO(name);
    test::require_equal(exported.at(name), t);
  }
  REQUIRE_THROWS_WITH(train::Trainer(options({"--init-from", dir.file("hf"), "--rope-theta", "500"})),
                      Contains("--rope-theta: 500 disagrees") && Contains(dir.file("hf/config.json")) &&
                          Contains("gives rope_theta 10000"));
}

namespace {

// The mean cross-entropy of the reference's logits (tests/llama_hf_reference.h, f64) on a batch.
double reference_loss(const TinyLlama& m, const Weights& w, const train::Batch& batch) {
  const std::vector<double> inputs = batch.inputs.to_vector(), targets = batch.targets.to_vector();
  const int64_t rows = batch.inputs.shape()[0], T = batch.inputs.shape()[1];
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int64_t> tokens(inputs.begin() + r * T, inputs.begin() + (r + 1) * T);
    const auto logits = test::reference_logits(m, w, tokens);
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<double>& row = logits[size_t(t)];
      const double top = *std::max_element(row.begin(), row.end());
      double sum = 0;
      for (double x : row) sum += std::exp(x - top);
      total += top + std::log(sum) - row[size_t(targets[size_t(r * T + t)])];
    }
  }
  return total / double(rows * T);
}

}  // namespace

TEST_CASE("llama_hf: brigade train --init-from DIR takes the whole model from DIR (epsilon, grouped-query heads, "
          "untied head, LLaMA 3 scaling, vocabulary, context): its first loss is the reference's, on one device and "
          "across two stages; flags that disagree with config.json are refused",
          "[train][llama_hf]") {
  TempDir dir("brigade_test_llama_hf_train_from_dir");
  std::filesystem::create_directories(dir.file("data"));
  data::write_token_shard(dir.file("data/train_000000.bin"), test::grammar_text(4000, 1), data::TokenWidth::u16);
  data::write_token_shard(dir.file("data/val_000000.bin"), test::grammar_text(1000, 2), data::TokenWidth::u16);
  TinyLlama m;
  m.eps = 1e-6;     // LLaMA 2's, which no flag sets
  m.vocab = 130;    // above the text's bytes, and no multiple of 128: the model keeps exactly these rows
  m.context = 24;   // the run's windows, from max_position_embeddings
  Weights w = test::make_weights(m, 11);
  // Small token vectors, so that the first RMSNorm's mean square is near the epsilon: reading 1e-5
  // instead of 1e-6 moves the loss well past float rounding.
  for (double& x : w.at("model.embed_tokens.weight").values) x = double(float(x * 1e-3));
  write_model(dir.file("hf"), config_json(m, "llama"), w, false);
  auto args = [&](std::vector<std::string> more) {
    std::vector<std::string> a = {"--data", dir.file("data"), "--init-from", dir.file("hf"), "--batch", "4",
                                  "--steps", "1", "--warmup", "0", "--eval", "4", "--device", "cpu",
                                  "--trace", "none", "--svg", "none"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  train::Trainer one(train::parse_train_args(args({"--stages", "0"})).options);
  const nn::GPTConfig& c = one.model().config();
  REQUIRE(c.arch == nn::Arch::llama);
  REQUIRE((c.n_layer == 2 && c.n_head == 4 && c.n_kv_head == 2 && c.n_embd == 32 && c.mlp_hidden == 48));
  REQUIRE((c.vocab_size == 130 && c.block_size == 24 && !c.tie_embeddings && !c.bias));
  REQUIRE(c.norm_eps == 1e-6);
  REQUIRE((c.rope.llama3.has_value() && c.rope.llama3->original_max_position_embeddings == 64));
  const double want = reference_loss(m, w, one.task().train_batch(0, 4));
  REQUIRE(one.train_step() == Approx(want).epsilon(1e-5));
  // The same through two pipeline stages (each rank reads its own layers from the file).
  std::ostringstream out;
  const train::TrainSummary piped =
      train::run_training(train::parse_train_args(args({"--stages", "2", "--microbatches", "2"})).options, out);
  INFO(out.str());
  REQUIRE(piped.first_loss == Approx(want).epsilon(1e-5));

  // A flag that disagrees with the file names itself, its value, config.json and the file's value.
  const std::string config = dir.file("hf/config.json");
  auto refused = [&](std::vector<std::string> more) {
    more.insert(more.end(), {"--stages", "0"});
    try {
      train::parse_train_args(args(more));
    } catch (const train::UsageError& e) {
      return std::string(e.what());
    }
    FAIL("accepted");
    return std::string();
  };
  REQUIRE_THAT(refused({"--layers", "3"}), Contains("--layers: 3 disagrees") && Contains(config) &&
                                               Contains("num_hidden_layers 2"));
  REQUIRE_THAT(refused({"--kv-heads", "4"}), Contains("--kv-heads: 4 disagrees") && Contains("num_key_value_heads 2"));
  REQUIRE_THAT(refused({"--arch", "gpt2"}), Contains("--arch: gpt2 disagrees") && Contains("model_type llama"));
  REQUIRE_THAT(refused({"--vocab", "200"}), Contains("--vocab: 200 is larger") && Contains("vocab_size 130"));
  REQUIRE_THAT(refused({"--model", "llama-1b"}), Contains("--model: llama-1b has --layers 16, which disagrees") &&
                                                     Contains(config) && Contains("num_hidden_layers 2"));
  // Flags that agree are accepted; a shorter context is a run's own choice.
  REQUIRE(train::parse_train_args(args({"--layers", "2", "--untied", "--context", "16", "--stages", "0"})).options.context == 16);

  // A checkpoint of the run records the file's epsilon and LLaMA 3 scaling; resuming it with another
  // model's is refused (it would be another run).
  one.save(dir.file("ckpt"));
  TinyLlama other = m;
  other.factor = 4;
  write_model(dir.file("hf-other"), config_json(other, "llama"), w, false);
  std::vector<std::string> resumed = args({"--stages", "0", "--resume", dir.file("ckpt")});
  resumed[3] = dir.file("hf-other");
  REQUIRE_THROWS_WITH(train::Trainer(train::parse_train_args(resumed).options),
                      Contains("rope_llama3 8 1 4 64 but this run has rope_llama3 4 1 4 64"));
  other = m;
  other.eps = 1e-5;
  write_model(dir.file("hf-other"), config_json(other, "llama"), w, false);
  REQUIRE_THROWS_WITH(train::Trainer(train::parse_train_args(resumed).options),
                      Contains("norm_eps 1e-06 but this run has norm_eps 1e-05"));
  // `brigade generate` rebuilds the same model from a checkpoint's settings: a run's untrained start
  // continues a prompt as the directory itself does.
  train::Trainer(train::parse_train_args(args({"--stages", "0"})).options).save(dir.file("start"));
  const std::vector<std::string> prompt = {"--prompt-ids", "5 17 0 36", "--ids", "--tokens", "12", "--temperature",
                                           "0", "--device", "cpu", "--checkpoint"};
  std::vector<std::string> from_hf = prompt, from_start = prompt;
  from_hf.push_back(dir.file("hf"));
  from_start.push_back(dir.file("start"));
  REQUIRE(generate(from_start) == generate(from_hf));
  // A GPT-2 run of the same sizes resuming it is refused for its family, before any tensor is read.
  REQUIRE_THROWS_WITH(train::Trainer(train::parse_train_args({"--data", dir.file("data"), "--resume", dir.file("ckpt"),
                                                              "--layers", "2", "--heads", "4", "--embd", "32",
                                                              "--context", "24", "--vocab", "130", "--batch", "4",
                                                              "--steps", "1", "--stages", "0", "--device", "cpu"})
                                         .options),
                      Contains("trained with --arch llama but this run has --arch gpt2"));
}
