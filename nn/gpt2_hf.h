// GPT-2 weights in the Hugging Face layout: read them into an nn::GPT, write an nn::GPT out as them.
//
// The Hugging Face `model.safetensors` of GPT-2 (and of models fine-tuned from it) names its tensors
// after OpenAI's original code, and stores every projection as a "Conv1D" — weight [in, out], used as
// x @ W + b — where brigade's Linear (like torch.nn.Linear) keeps weight [out, in], used as x @ W^T + b:
//
//   Hugging Face                      brigade                          weight
//   wte.weight                        embed.wte.weight                 as is [vocab, C]
//   wpe.weight                        embed.wpe.weight                 as is [context, C]
//   h.N.ln_1.{weight,bias}            blocks.N.ln1.{weight,bias}
//   h.N.attn.c_attn.{weight,bias}     blocks.N.attn.qkv.{weight,bias}  transposed: [C, 3C] <-> [3C, C]
//   h.N.attn.c_proj.{weight,bias}     blocks.N.attn.proj.{weight,bias} transposed
//   h.N.ln_2.{weight,bias}            blocks.N.ln2.{weight,bias}
//   h.N.mlp.c_fc.{weight,bias}        blocks.N.mlp.fc.{weight,bias}    transposed: [C, 4C] <-> [4C, C]
//   h.N.mlp.c_proj.{weight,bias}      blocks.N.mlp.proj.{weight,bias}  transposed
//   ln_f.{weight,bias}                head.ln_f.{weight,bias}
//
// Both split the fused c_attn output as [q | k | v], each head's columns contiguous, so no column is
// reordered. The output head is tied to wte in both (a file's `lm_head.weight`, where present, must
// equal wte). Reading also accepts names with a "transformer." prefix (save_pretrained of a
// GPT2LMHeadModel) and skips the causal-mask buffers older files carry (h.N.attn.bias,
// h.N.attn.masked_bias). The architecture matches GPT-2's exactly: pre-norm blocks, LayerNorm eps
// 1e-5, GELU's tanh approximation.
//
// The vocabulary may be padded (llm.c pads GPT-2's 50257 to 50304 for faster GEMMs): reading into a
// larger vocabulary fills the extra rows of wte with zeros, and writing keeps the first `vocab` rows.
// A model of a shorter context reads the first rows of wpe (fine-tuning on shorter windows).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/gpt.h"
#include "nn/hf_shards.h"

namespace brigade::nn {

// True when a safetensors file's tensors are GPT-2's in the Hugging Face layout (as opposed to, say,
// a brigade checkpoint's "model.*" names).
bool is_hf_gpt2(const std::map<std::string, Tensor>& tensors);
// The same from the tensors' names alone (a file's header, read without its data).
bool is_hf_gpt2(const std::set<std::string>& names);

// The configuration a Hugging Face GPT-2 file describes: vocab_size, block_size, n_embd and n_layer
// from the tensors' shapes; n_head from a config.json beside the file when there is one (its
// "n_head"), else GPT-2's for the width (768: 12, 1024: 16, 1280: 20, 1600: 25). Throws naming the
// file when the width is none of those and there is no config.json.
GPTConfig hf_gpt2_config(const std::string& path);
// The same for a file already read (`path` for the messages and to find config.json).
GPTConfig hf_gpt2_config(const std::map<std::string, Tensor>& tensors, const std::string& path);
// The same from the tensors' names and shapes alone (a header; the path reads only the header).
GPTConfig hf_gpt2_config(const std::map<std::string, Shape>& shapes, const std::string& path);
// The same for a sharded model, or one file as an index (hf_single_file_index): its names from the
// weight map, its sizes from the headers of the shards holding wte and wpe. No tensor data is read.
GPTConfig hf_gpt2_config(const HfIndex& index);

// Hugging Face names and layout -> brigade's state_dict for a model with `config` (whose vocabulary
// may be larger than the file's: padding rows are zero; its context may be shorter). Tensors are converted to config.dtype.
// Throws naming `source` when a tensor is missing, unexpected, or of the wrong shape.
// With `held` (brigade names: a pipeline rank's part of the model), only those are converted and
// required, and the names are not checked (load_hf_gpt2_sharded checks them on the index).
std::map<std::string, Tensor> state_dict_from_hf_gpt2(const std::map<std::string, Tensor>& hf, const GPTConfig& config,
                                                      const std::string& source,
                                                      const std::set<std::string>* held = nullptr);
// brigade's state_dict -> Hugging Face names and layout, wte cut to its first `vocab` rows.
std::map<std::string, Tensor> hf_gpt2_from_state_dict(const std::map<std::string, Tensor>& state, int64_t n_layer,
                                                      int64_t vocab);

// Loads `path` into `model` (its config must match the file's, the vocabulary possibly padded, the
// context possibly shorter).
void load_hf_gpt2(GPT& model, const std::string& path);
void load_hf_gpt2(GPT& model, const std::map<std::string, Tensor>& tensors, const std::string& path);
// Loads GPT-2 sharded in Hugging Face's layout (nn/hf_shards.h; `index_path` is the
// model.safetensors.index.json, config.json beside it gives n_head) into `model`. A model holding
// some layers (a pipeline rank's) reads only the shards, and the tensors, of those layers; the
// names of the whole index are checked all the same. Errors name the index.
void load_hf_gpt2_sharded(GPT& model, const std::string& index_path);
// The same from an index already made: read_hf_index's, or one single file's (hf_single_file_index).
void load_hf_gpt2_indexed(GPT& model, const HfIndex& index);

// Writes `model` to `path` in the Hugging Face layout, f32, with its first `vocab` token rows (0: all
// of them), atomically; metadata {"format": "pt"} as Hugging Face's own files have.
void save_hf_gpt2(const GPT& model, const std::string& path, int64_t vocab = 0);

// The config.json of a Hugging Face GPT-2 with `config`'s sizes and `vocab` tokens (0: all): only
// the fields that are not GPT-2's defaults in transformers' GPT2Config — architectures,
// model_type, n_embd, n_head, n_layer, n_positions, vocab_size (layer_norm_epsilon 1e-5 and
// activation_function "gelu_new" are the defaults and brigade's).
std::string hf_gpt2_config_json(const GPTConfig& config, int64_t vocab = 0);

// Writes `model` as a Hugging Face model directory `dir` (created if need be): config.json, then the
// weights as save_hf_gpt2 would, in shards of at most `max_shard_bytes` of tensor data with their
// index written last (nn/hf_shards.h), or one model.safetensors when they fit in one. Returns the
// files written, in order.
std::vector<std::string> save_hf_gpt2_dir(const GPT& model, const std::string& dir, int64_t max_shard_bytes,
                                          int64_t vocab = 0);

}  // namespace brigade::nn
