// Hugging Face's tokenizer.json, for byte-level BPE models (GPT-2, LLaMA 3, Qwen2 and their kin):
// read, and written.
//
// What is read, and what each part must be (anything else is refused, naming the file and the part,
// rather than read as something it is not):
//
//   model          "type": "BPE", its "vocab" (token text -> id) and "merges" in rank order, each
//                  either "left right" or ["left", "right"]. "ignore_merges" is honoured. A BPE
//                  with dropout, byte_fallback, a continuing_subword_prefix or an end_of_word_suffix
//                  is not byte-level BPE and is refused, as are other model types (Unigram,
//                  WordPiece, WordLevel).
//   added_tokens   id, content, special (text/added_tokens.h). Their ids join the vocabulary's: the
//                  ids of both together must be 0 .. N-1. lstrip, rstrip and single_word are refused.
//   pre_tokenizer  ByteLevel alone (use_regex true: GPT-2's pattern), or a Sequence of a Split by one
//                  of the patterns text/pretokenize.h implements (recognised by the regex's exact
//                  text, behavior "Isolated", not inverted) and a ByteLevel with use_regex false —
//                  as LLaMA 3 and Qwen2 write it. add_prefix_space must be false.
//   normalizer     null, or NFC (Qwen2's: text/nfc.h); any other is refused, since encoding without
//                  it would give other ids than the model was trained on.
//   decoder        must be ByteLevel.
//   post_processor not applied: encode() never adds a template's tokens (LLaMA 3's leading
//                  <|begin_of_text|>); callers that want one add it.
//   truncation, padding: ignored (they shape batches, not encodings).
#pragma once

#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace brigade::text {

// Reads the tokenizer.json at `path`. Throws brigade::Error naming the file and what it refuses.
Tokenizer load_tokenizer_json(const std::string& path);
// The same from the file's contents; `name` is for error messages.
Tokenizer parse_tokenizer_json(std::string_view text, const std::string& name = "tokenizer.json");

// A tokenizer.json that parse_tokenizer_json() (and Hugging Face's tokenizers) read back as the same
// tokenizer: every token in model.vocab, added tokens listed again under added_tokens.
std::string tokenizer_json(const Tokenizer& tokenizer);

}  // namespace brigade::text
