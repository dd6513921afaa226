// LLaMA-family weights in the Hugging Face layout (LlamaForCausalLM, and Mistral's and Qwen2's
// files, which name their tensors the same): read them into a llama nn::GPT, write one out as them.
//
// A Hugging Face model directory holds config.json (the sizes, nn/llama_hf_config.h) and the
// weights, one model.safetensors or shards with model.safetensors.index.json (nn/hf_shards.h).
// transformers' Linear is torch.nn.Linear, weight [out, in] like brigade's, so every tensor maps
// one to one, as it is (C: hidden_size, H: heads, Hkv: key/value heads, hd = C / H, I:
// intermediate_size, V: vocab_size):
//
//   Hugging Face                                   brigade                          shape
//   model.embed_tokens.weight                      embed.wte.weight                 [V, C]
//   model.layers.N.input_layernorm.weight          blocks.N.ln1.weight              [C]
//   model.layers.N.self_attn.q_proj.{weight,bias}  blocks.N.attn.q.{weight,bias}    [H hd, C], [H hd]
//   model.layers.N.self_attn.k_proj.{weight,bias}  blocks.N.attn.k.{weight,bias}    [Hkv hd, C], [Hkv hd]
//   model.layers.N.self_attn.v_proj.{weight,bias}  blocks.N.attn.v.{weight,bias}    [Hkv hd, C], [Hkv hd]
//   model.layers.N.self_attn.o_proj.{weight,bias}  blocks.N.attn.o.{weight,bias}    [C, H hd], [C]
//   model.layers.N.post_attention_layernorm.weight blocks.N.ln2.weight              [C]
//   model.layers.N.mlp.gate_proj.weight            blocks.N.mlp.gate.weight         [I, C]
//   model.layers.N.mlp.up_proj.weight              blocks.N.mlp.up.weight           [I, C]
//   model.layers.N.mlp.down_proj.weight            blocks.N.mlp.down.weight         [C, I]
//   model.norm.weight                              head.ln_f.weight                 [C]
//   lm_head.weight                                 head.lm_head.weight              [V, C]
//
// Biases exist only with attention_bias (qwen2: on q, k, v and not o, whose brigade bias is then
// zero). lm_head.weight is absent when tie_word_embeddings is true (the head reuses embed_tokens;
// a file that has it all the same must hold the same values). The q and k rows are in the order
// "rotate_half" rotary embedding pairs them (element i with i + hd/2 in each head), which is
// brigade's: transformers' files need no permutation (only Meta's original checkpoints do, and
// transformers' conversion script applies it). Older files carry rotary_emb.inv_freq
// buffers (each layer's, or the model's), which are not weights and are skipped.
//
// Everything a file holds is checked against config.json before any tensor data is read: every
// tensor the configuration implies is there, there is nothing else, and each shape is the one the
// configuration gives; refusals name the file (the shard), the tensor and what differs. A pipeline
// rank's model (GPT built with some layers) then reads only the shards and tensors of its layers.
// The vocabulary may be padded: reading into a larger one fills the extra rows with zeros, writing
// keeps the first `vocab` rows.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/hf_shards.h"
#include "nn/llama_hf_config.h"

namespace brigade::nn {

// True when the tensors' names are a LLaMA-family model's in the Hugging Face layout.
bool is_hf_llama(const std::set<std::string>& names);

// A LLaMA directory found on disk: its config.json and its weights' index (the shards', or one
// model.safetensors as an index of one).
struct HfLlamaFiles {
  std::string config_path;  // of config.json
  HfLlamaConfig config;
  HfIndex index;
};

// Reads config.json beside the weights of `index` (the index file, or the single file). Throws
// naming the directory when there is no config.json (a LLaMA's sizes are not all in its tensors).
HfLlamaFiles read_hf_llama_files(const HfIndex& index);

// Checks every tensor `files` holds against its config.json (names and shapes, from the headers
// alone), then loads those `model` holds (the whole model, or a pipeline rank's layers), converted
// to the model's dtype, on its device. The model's configuration must be the file's (vocabulary
// possibly padded); an error names what differs.
void load_hf_llama(GPT& model, const HfLlamaFiles& files);

// Writes `model` (a whole llama GPT) as a Hugging Face model directory `dir` (created if need be):
// config.json (hf_llama_config_json), then the weights in f32 as save_hf_gpt2_dir writes them, in
// shards of at most `max_shard_bytes` with the index last, or one model.safetensors; each file
// atomically. `vocab` > 0 keeps only the first `vocab` token rows. Returns the files written, in order.
std::vector<std::string> save_hf_llama_dir(const GPT& model, const std::string& dir, int64_t max_shard_bytes,
                                           int64_t vocab = 0, std::optional<int64_t> bos_token_id = std::nullopt,
                                           std::optional<int64_t> eos_token_id = std::nullopt);

}  // namespace brigade::nn
