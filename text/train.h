// Training a byte-level BPE: learning merges from a corpus, the way GPT-2's vocabulary was made.
//
// The corpus is cut into pieces by GPT-2's pre-tokeniser (text/pretokenize.h) and the distinct
// pieces counted (WordCounts). Each piece starts as its bytes. Then, until the vocabulary is full,
// the most frequent adjacent pair of tokens over all pieces (each counted as often as its piece
// occurs) becomes a new token, and every occurrence of the pair is merged, left to right, exactly
// as Tokenizer::encode() will merge it. Counts are kept up to date incrementally: a merge revisits
// only the pieces that hold the pair, so a few megabytes train to thousands of tokens in seconds.
//
// The vocabulary it makes: ids 0..255 the single bytes in GPT-2's order (text/byte_alphabet.h:
// the printable bytes first, so ids 0..255 mean what they mean in GPT-2), then the token of each
// merge in the order learned (should two merges spell the same text, the token comes once), then
// "<|endoftext|>" as the last id. Deterministic: among pairs equally
// frequent, the one whose (left id, right id) is smallest is merged first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace brigade::text {

// How often each piece of a corpus occurs: what train_bpe learns from. Texts can be added one at a
// time (a file, a document), so a corpus need not be in memory at once.
class WordCounts {
 public:
  // Counts the pieces of `text`. "<|endoftext|>" in it separates documents: it ends a piece and is
  // not itself counted, so it is never learned as text.
  void add(std::string_view text);
  // Counts the pieces of the file at `path` (throws brigade::Error naming it when it cannot be read).
  void add_file(const std::string& path);

  const std::unordered_map<std::string, int64_t>& counts() const { return counts_; }
  int64_t bytes() const { return bytes_; }  // bytes added, "<|endoftext|>" included

 private:
  std::unordered_map<std::string, int64_t> counts_;
  int64_t bytes_ = 0;
};

struct BpeTrainOptions {
  // Tokens in the trained vocabulary: 256 bytes + merges + "<|endoftext|>"; at least 257.
  int64_t vocab_size = 4096;
  // A pair seen fewer times than this is never merged: training stops there, and the vocabulary
  // comes out smaller than vocab_size (Tokenizer::vocab_size() says by how much).
  int64_t min_frequency = 2;
};

Tokenizer train_bpe(const WordCounts& words, const BpeTrainOptions& options);
// The same for a corpus already in memory: each string is one document.
Tokenizer train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& options);

}  // namespace brigade::text
