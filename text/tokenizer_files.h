// A tokenizer's files: GPT-2's vocab.json and merges.txt, or Hugging Face's tokenizer.json
// (text/tokenizer_json.h), read and written.
//
//   vocab.json  one JSON object: each token's text (in the byte alphabet, text/byte_alphabet.h) to
//               its id; the ids are 0 .. N-1, each once. {"!": 0, "\"": 1, ..., "<|endoftext|>": 50256}
//   merges.txt  a first line "#version: 0.2", then one merge per line, in rank order: the two tokens'
//               texts separated by one space ("Ġ t"). A token's text never holds a space (the byte
//               alphabet spells it "Ġ"), so the line splits one way only.
//
// OpenAI's GPT-2 download names the same two files encoder.json and vocab.bpe; Hugging Face's
// copy names them vocab.json and merges.txt. load_tokenizer(dir) reads either pair — or, first,
// the directory's tokenizer.json when it has one (a Hugging Face model directory has it beside
// config.json, and for GPT-2 beside vocab.json too: both say the same).
//
// Files are checked as they are read, and a bad one is refused with an Error naming the file and,
// for merges.txt, the line: JSON that is not an object of whole numbers, ids repeated or missing,
// a byte without its token, a merge line that is not two tokens, a merge of tokens (or into a
// token) the vocabulary lacks, a merge repeated. Reading is strict where GPT-2's own reader is not:
// it drops merges.txt's first line whatever it holds, and its last line when the file does not end
// with a newline; here a missing header is an error and the last merge counts with or without one.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace brigade::text {

// Reads DIR/tokenizer.json, or, where there is none, DIR/vocab.json and DIR/merges.txt, or, where
// there is no vocab.json either, GPT-2's original names DIR/encoder.json and DIR/vocab.bpe.
Tokenizer load_tokenizer(const std::string& dir);
// True when DIR holds one of those: tokenizer.json, vocab.json or encoder.json.
bool has_tokenizer(const std::string& dir);
// Reads the two files at these paths.
Tokenizer load_tokenizer(const std::string& vocab_path, const std::string& merges_path);
// The same from the files' contents; the names are for error messages.
Tokenizer parse_tokenizer(std::string_view vocab_json, std::string_view merges_txt,
                          const std::string& vocab_name = "vocab.json", const std::string& merges_name = "merges.txt");

// Writes DIR/vocab.json and DIR/merges.txt when they say all of the tokenizer
// (Tokenizer::is_gpt2_style()), else DIR/tokenizer.json, creating DIR if needed, each file atomically
// (core/atomic_file.h): a reader sees the old file or the complete new one. The other kind's files,
// left by an earlier save, are removed, so that load_tokenizer(DIR) reads back this tokenizer.
// Returns the names written ("vocab.json, merges.txt" or "tokenizer.json").
std::string save_tokenizer(const Tokenizer& tokenizer, const std::string& dir);
// The two files' contents: vocab.json with one token per line, in id order.
std::string vocab_json(const Tokenizer& tokenizer);
std::string merges_txt(const Tokenizer& tokenizer);

// A tokenizer carried in a checkpoint's metadata (string to string): the text of its vocab.json and
// merges.txt under "tokenizer.vocab_json" and "tokenizer.merges_txt" when they say all of it, else
// of its tokenizer.json under "tokenizer.json". tokenizer_from_metadata() reads either back, or gives
// nothing when there is neither; `path` names the checkpoint in errors.
void add_tokenizer_metadata(const Tokenizer& tokenizer, std::map<std::string, std::string>& metadata);
std::optional<Tokenizer> tokenizer_from_metadata(const std::map<std::string, std::string>& metadata,
                                                 const std::string& path);

}  // namespace brigade::text
