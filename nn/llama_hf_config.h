// The config.json of a Hugging Face LLaMA-family model, read into an nn::GPTConfig and written back
// (nn/llama_hf.h reads and writes the weights beside it).
//
// transformers writes every field of its config class, so a file from save_pretrained holds them
// all; a field a hand-written file leaves out takes transformers' default for the model type. What
// is read, and what brigade makes of it:
//
//   config.json                          nn::GPTConfig
//   model_type                           llama, mistral or qwen2 (the same decoder, named three ways)
//   hidden_size                          n_embd
//   intermediate_size                    mlp_hidden
//   num_hidden_layers                    n_layer
//   num_attention_heads                  n_head
//   num_key_value_heads                  n_kv_head (absent: num_attention_heads)
//   head_dim                             must be hidden_size / num_attention_heads when present
//   rms_norm_eps                         norm_eps
//   rope_theta                           rope.theta
//   rope_scaling                         null, {"rope_type": "default"} or {"rope_type": "llama3",
//                                        "factor", "low_freq_factor", "high_freq_factor",
//                                        "original_max_position_embeddings"} -> rope.llama3
//                                        (older files spell rope_type "type")
//   rope_parameters                      transformers 5's spelling of both: one object with
//                                        rope_theta, rope_type and the scaling's fields
//   max_position_embeddings              block_size
//   vocab_size                           vocab_size
//   tie_word_embeddings                  tie_embeddings
//   attention_bias                       bias (qwen2 has no such field: its q, k, v always have
//                                        biases and its o_proj none, which brigade holds as zeros)
//   bos_token_id, eos_token_id           kept to be written back (a list of eos ids: the first)
//
// Refused, naming the file and the field: another model_type, another rope_scaling type ("linear",
// "dynamic", "yarn", "longrope": scalings brigade does not implement), mlp_bias true, hidden_act
// other than "silu", a sliding window shorter than the context (Mistral v0.1, Qwen2 with
// use_sliding_window), a head_dim that is not hidden_size / num_attention_heads, key/value heads that
// do not divide the heads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/gpt.h"

namespace brigade::nn {

struct HfLlamaConfig {
  GPTConfig model;         // arch llama, on the CPU in f32; the caller sets device and dtype
  std::string model_type;  // as the file gives it
  // False for qwen2: attention biases on q, k and v only. The model's o bias is then zero, and the
  // file has no o_proj.bias to read.
  bool o_proj_bias = false;
  std::optional<int64_t> bos_token_id, eos_token_id;
};

// The model_type of the config.json at `path` ("" when it gives none).
std::string hf_model_type(const std::string& path);

// Reads and checks `path` (a config.json). Throws Error naming the file and the field.
HfLlamaConfig read_hf_llama_config(const std::string& path);

// The config.json of `config` (a llama nn::GPTConfig) as transformers' LlamaConfig reads it, with
// `vocab` tokens (0: all of the model's): architectures ["LlamaForCausalLM"], model_type "llama",
// torch_dtype "float32" (brigade writes f32 weights), the sizes, rms_norm_eps, the rope fields in
// transformers 4's spelling, rope_theta and rope_scaling (transformers 5 reads them too),
// tie_word_embeddings, attention_bias and mlp_bias false, hidden_act "silu", and the bos/eos ids
// when given.
std::string hf_llama_config_json(const GPTConfig& config, int64_t vocab = 0,
                                 std::optional<int64_t> bos_token_id = std::nullopt,
                                 std::optional<int64_t> eos_token_id = std::nullopt);

}  // namespace brigade::nn
