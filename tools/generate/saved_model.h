// A trained GPT and its tokenizer, read back from disk for generation.
//
// Two kinds of file hold one:
//   - a `brigade train --data` checkpoint (a directory of shards and their index, or an older
//     build's single file): the model's sizes are in its metadata (--layers, --heads, --embd,
//     --context, --vocab), and so is the tokenizer it was trained with (the text of its vocab.json
//     and merges.txt, "tokenizer.vocab_json" and "tokenizer.merges_txt"), so it is all generation
//     needs;
//   - a Hugging Face model, GPT-2 or LLaMA (nn/hf_model.h), one file or sharded, whose tokenizer is
//     read from the model's directory (tokenizer.json, or vocab.json + merges.txt:
//     text/tokenizer_files.h) when it has one there, else from the directory --tokenizer names (or
//     none: `brigade generate --prompt-ids --ids`).
//
// Reading is in two parts, so that a pipeline rank holds and reads only its own layers: the
// description (sizes, vocabulary, tokenizer) from headers, indexes and metadata alone, then the
// weights of whatever layers a model holds.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nn/gpt.h"
#include "nn/hf_model.h"
#include "text/tokenizer.h"

namespace brigade::generate_cli {

// What a checkpoint describes; no tensor data read.
struct SavedModelInfo {
  enum class Kind { brigade_sharded, brigade_file, hugging_face };
  Kind kind = Kind::brigade_sharded;
  std::string path;
  std::optional<nn::HfModel> hf;  // Kind::hugging_face: its family, index and config.json
  nn::GPTConfig config;   // on the CPU; the caller sets the device
  std::optional<text::Tokenizer> tokenizer;
  int64_t vocab = 0;  // the real vocabulary (the model's may be padded): tokens at or past it are never generated
};

// Describes `path`. `tokenizer_dir`, when given, wins over a tokenizer in the checkpoint. Throws
// brigade::Error naming the file: missing, not a safetensors file or checkpoint, a sort-task
// checkpoint (no language model), metadata missing, a tokenizer larger than the model's vocabulary.
SavedModelInfo read_saved_model_info(const std::string& path, const std::string& tokenizer_dir = "");

// Loads the weights `model` holds (the whole model, or a pipeline rank's layers) from the checkpoint
// `info` describes, reading only those tensors.
void load_saved_weights(const SavedModelInfo& info, nn::GPT& model);

struct SavedModel {
  std::shared_ptr<nn::GPT> model;
  std::optional<text::Tokenizer> tokenizer;
  int64_t vocab = 0;
};

// The whole model on `device`, in eval mode.
SavedModel load_saved_model(const std::string& path, Device device, const std::string& tokenizer_dir = "");

}  // namespace brigade::generate_cli
