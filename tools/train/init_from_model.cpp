#include "init_from_model.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "nn/hf_model.h"

namespace brigade::train {

namespace {

// Where the file's settings are written, for the messages: config.json when there is one beside the
// weights, else the weights themselves (a GPT-2 without config.json: its sizes are the tensors').
std::string source_of(const nn::HfModel& hf) {
  if (hf.llama) return hf.llama->config_path;
  const std::filesystem::path config = std::filesystem::path(hf.index.path).parent_path() / "config.json";
  std::error_code ec;
  return std::filesystem::is_regular_file(config, ec) ? config.string() : hf.index.path;
}

}  // namespace

void take_init_from_model(const std::vector<std::string>& args, TrainOptions& o) {
  if (o.init_from.empty()) return;
  std::optional<nn::HfModel> hf;
  try {
    hf = nn::find_hf_model(o.init_from);
  } catch (const Error& e) {
    cli::bad_flag("--init-from", e.what());
  }
  if (!hf) return;  // a brigade checkpoint: the flags describe its model
  const nn::GPTConfig file = nn::hf_model_config(*hf);
  const std::string source = source_of(*hf);
  const bool llama = file.arch == nn::Arch::llama;
  // A flag the user gave, or the --model preset set, must say what the file says; the others take
  // the file's values. Compared as the model they build (0 kv heads: as many as heads, ...).
  const nn::GPTConfig asked = cli::gpt_config(
      {.layers = o.layers, .heads = o.heads, .embd = o.embd, .decoder = o.decoder}, Device::cpu(), DType::f32, 0);
  const bool preset = cli::flag_given(args, "--model");
  auto take = [&](const char* flag, const std::string& given, const std::string& files, const char* field) {
    if (given == files) return;
    if (cli::flag_given(args, flag))
      cli::bad_flag(flag, given + " disagrees with --init-from's model: " + source + " gives " + field + " " + files +
                              " (drop " + flag + " to take the file's)");
    if (preset)
      cli::bad_flag("--model", o.model + " has " + flag + " " + given + ", which disagrees with --init-from's model: " +
                                   source + " gives " + field + " " + files + " (drop --model to take the file's)");
  };
  const int64_t file_kv = file.n_kv_head > 0 ? file.n_kv_head : file.n_head;
  take("--arch", nn::arch_name(asked.arch), nn::arch_name(file.arch), llama ? "model_type" : "the family");
  take("--layers", std::to_string(asked.n_layer), std::to_string(file.n_layer), llama ? "num_hidden_layers" : "n_layer");
  take("--heads", std::to_string(asked.n_head), std::to_string(file.n_head), llama ? "num_attention_heads" : "n_head");
  take("--embd", std::to_string(asked.n_embd), std::to_string(file.n_embd), llama ? "hidden_size" : "n_embd");
  take("--kv-heads", std::to_string(asked.n_kv_head > 0 ? asked.n_kv_head : asked.n_head), std::to_string(file_kv),
       llama ? "num_key_value_heads" : "key/value heads (as many as n_head)");
  take("--mlp-hidden", std::to_string(nn::mlp_hidden_of(asked)), std::to_string(nn::mlp_hidden_of(file)),
       llama ? "intermediate_size" : "the MLP width (4 x n_embd)");
  if (!llama && cli::flag_given(args, "--rope-theta"))
    cli::bad_flag("--rope-theta", "--init-from's model is a GPT-2 (" + source + "), which has no rotary positions");
  if (llama) take("--rope-theta", cli::show_number(asked.rope.theta), cli::show_number(file.rope.theta), "rope_theta");
  take("--untied", o.decoder.untied ? "untied" : "tied", file.tie_embeddings ? "tied" : "untied",
       llama ? "tie_word_embeddings (as a head)" : "the GPT-2 head, always");
  // The vocabulary: the task's token ids must be below the file's (checked again against the data
  // when the task is read); the model keeps all of the file's rows.
  if (cli::flag_given(args, "--vocab") && o.vocab > file.vocab_size)
    cli::bad_flag("--vocab", std::to_string(o.vocab) + " is larger than the vocabulary of --init-from's model: " +
                                 source + " gives vocab_size " + std::to_string(file.vocab_size));
  // Bare shards (no tokenizer beside them) hold the model's own token ids: the task's vocabulary is
  // the model's, not GPT-2's 50257 that such shards are otherwise taken to be.
  std::error_code ec;
  if (!cli::flag_given(args, "--vocab") && !o.data.empty() &&
      !std::filesystem::is_directory(std::filesystem::path(o.data) / "tokenizer", ec))
    o.vocab = file.vocab_size;
  // The context: shorter than the file's positions is fine; a GPT-2 has no positions past them.
  // Without --context a GPT-2 trains on its whole window (1024); a llama's max_position_embeddings
  // is what its rotary positions reach (131072 for LLaMA 3), far past a fine-tuning window's memory,
  // so it takes at most kDefaultLlamaContext (the run report prints the context used).
  constexpr int64_t kDefaultLlamaContext = 2048;
  if (!cli::flag_given(args, "--context") && !preset)
    o.context = llama ? std::min(file.block_size, kDefaultLlamaContext) : file.block_size;
  else if (!llama && o.context > file.block_size)
    cli::bad_flag("--context", std::to_string(o.context) + " is longer than the " + std::to_string(file.block_size) +
                                   " learned positions of --init-from's GPT-2 (" + source + ", n_positions)");
  o.layers = file.n_layer;
  o.heads = file.n_head;
  o.embd = file.n_embd;
  o.decoder = {.arch = file.arch,
               .kv_heads = llama ? file.n_kv_head : 0,
               .mlp_hidden = file.mlp_hidden,
               .rope = llama ? file.rope : RopeParams{},
               .untied = !file.tie_embeddings,
               .norm_eps = file.norm_eps,
               .attention_bias = llama && file.bias};
  o.model_vocab = file.vocab_size;
}

}  // namespace brigade::train
