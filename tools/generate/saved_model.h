// A trained GPT and its tokenizer, read back from disk for generation.
//
// Two kinds of file hold one:
//   - a `brigade train --data` checkpoint: the model's sizes are in its metadata (--layers, --heads,
//     --embd, --context, --vocab), and so is the tokenizer it was trained with (the text of its
//     vocab.json and merges.txt, "tokenizer.vocab_json" and "tokenizer.merges_txt"), so the file is
//     all generation needs;
//   - GPT-2 weights in the Hugging Face layout (nn/gpt2_hf.h), whose tokenizer is a separate download
//     (vocab.json + merges.txt) that --tokenizer names.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nn/gpt.h"
#include "text/tokenizer.h"

namespace brigade::generate_cli {

struct SavedModel {
  std::shared_ptr<nn::GPT> model;
  std::optional<text::Tokenizer> tokenizer;
  int64_t vocab = 0;  // the real vocabulary (the model's may be padded): tokens at or past it are never generated
};

// Reads `path` onto `device`. `tokenizer_dir`, when given, wins over a tokenizer in the checkpoint.
// Throws brigade::Error naming the file: not a safetensors file, a sort-task checkpoint (no language
// model), metadata missing.
SavedModel load_saved_model(const std::string& path, Device device, const std::string& tokenizer_dir = "");

}  // namespace brigade::generate_cli
