// A Hugging Face model on disk, of either family brigade reads: GPT-2 (nn/gpt2_hf.h) or LLaMA
// (nn/llama_hf.h). What `brigade train --init-from`, `brigade generate` and `brigade export` accept
// besides brigade's own checkpoints, found in one place so that they accept the same paths:
//
//   DIR                                  holding model.safetensors.index.json and its shards, or one
//                                        model.safetensors; config.json beside them
//   DIR/model.safetensors.index.json     the index itself
//   FILE.safetensors                     one file whose tensors have Hugging Face's names
//
// The family is config.json's model_type when it names one ("gpt2"; "llama", "mistral", "qwen2"),
// else what the tensors' names are. A LLaMA needs its config.json (its sizes are not all in the
// tensors); GPT-2 does without one.
#pragma once

#include <optional>
#include <string>

#include "nn/gpt.h"
#include "nn/hf_shards.h"
#include "nn/llama_hf.h"

namespace brigade::nn {

struct HfModel {
  Arch family = Arch::gpt2;
  HfIndex index;                     // the shards', or one file's (hf_single_file_index)
  std::optional<HfLlamaFiles> llama;  // family llama: its config.json, read and checked
};

// What `path` is, from its index, headers and config.json alone (no tensor data is read); nothing
// when it is not a Hugging Face model (a brigade checkpoint: a directory with index.json, or a file
// of "model.*" tensors). Throws naming the file when it is one but cannot be read.
std::optional<HfModel> find_hf_model(const std::string& path);

// The configuration the model describes (on the CPU, f32).
GPTConfig hf_model_config(const HfModel& hf);

// Loads the tensors `model` holds (the whole model, or a pipeline rank's layers) from `hf`.
void load_hf_model(GPT& model, const HfModel& hf);

}  // namespace brigade::nn
