// `brigade export`: a trained model written in Hugging Face's layout, for the tools that read it
// (transformers' from_pretrained, llama.cpp's converters, ...). tools/brigade.cpp dispatches here.
//
// Its own command, not a flag of train or generate: exporting reads a finished checkpoint and runs
// no model, and "export" is the word a user searches --help for. The input is anything
// `brigade generate` reads (tools/generate/saved_model.h): a `brigade train --data` checkpoint, a
// single file or a sharded directory, or a Hugging Face model itself (to reshard it). The output
// directory gets config.json, the weights (one model.safetensors, or shards of at most
// --max-shard-size with model.safetensors.index.json written last) in the layout of the model's
// family (nn/gpt2_hf.h, nn/llama_hf.h) and, when the checkpoint carries its tokenizer, its files.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace brigade::export_cli {

// Runs `brigade export <args>`; returns the exit status (2: bad command line, 1: an error).
int export_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace brigade::export_cli
