#include "text/train.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "core/error.h"
#include "core/read_file.h"
#include "text/byte_alphabet.h"
#include "text/pretokenize.h"

namespace brigade::text {

void WordCounts::add(std::string_view text) {
  bytes_ += int64_t(text.size());
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(kEndOfText, start);
    if (end == std::string_view::npos) end = text.size();
    for (const std::string_view piece : pretokenize(text.substr(start, end - start))) ++counts_[std::string(piece)];
    start = end + kEndOfText.size();
  }
}

void WordCounts::add_file(const std::string& path) { add(read_file(path, "WordCounts::add_file")); }

namespace {

uint64_t pair_key(TokenId left, TokenId right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }
TokenId left_of(uint64_t key) { return TokenId(key >> 32); }
TokenId right_of(uint64_t key) { return TokenId(key & 0xFFFFFFFFu); }

// A pair and its count when it was queued; stale once the count has changed since.
struct Candidate {
  int64_t count;
  uint64_t pair;
};

// The priority queue's order: the top is the most frequent pair, and among equals the smallest
// (left id, right id) — which is what makes training deterministic.
struct LessUrgent {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.count != b.count ? a.count < b.count : a.pair > b.pair;
  }
};

// Replaces each occurrence of `left` `right` in `word` by `merged`, left to right (so in "a a a"
// the first two merge) — the order Tokenizer::encode() merges in.
void merge_pair(std::vector<TokenId>& word, TokenId left, TokenId right, TokenId merged) {
  size_t w = 0;
  for (size_t i = 0; i < word.size(); ++i, ++w) {
    if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
      word[w] = merged;
      ++i;
    } else {
      word[w] = word[i];
    }
  }
  word.resize(w);
}

bool holds_pair(const std::vector<TokenId>& word, TokenId left, TokenId right) {
  for (size_t i = 0; i + 1 < word.size(); ++i)
    if (word[i] == left && word[i + 1] == right) return true;
  return false;
}

class BpeTrainer {
 public:
  explicit BpeTrainer(const WordCounts& corpus) {
    const std::array<uint8_t, 256>& order = bytes_in_alphabet_order();
    std::array<TokenId, 256> byte_id{};
    for (size_t id = 0; id < 256; ++id) {
      byte_id[order[id]] = TokenId(id);
      tokens_.push_back(bytes_to_symbols(std::string(1, char(order[id]))));
      ids_.emplace(tokens_.back(), TokenId(id));
    }
    // Sorted, so that nothing depends on the hash map's order.
    std::vector<std::pair<std::string, int64_t>> sorted(corpus.counts().begin(), corpus.counts().end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [piece, count] : sorted) {
      std::vector<TokenId> word;
      word.reserve(piece.size());
      for (const char c : piece) word.push_back(byte_id[static_cast<unsigned char>(c)]);
      words_.push_back(std::move(word));
      frequency_.push_back(count);
    }
    for (uint32_t w = 0; w < words_.size(); ++w) {
      const std::vector<TokenId>& word = words_[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        const uint64_t key = pair_key(word[i], word[i + 1]);
        pair_counts_[key] += frequency_[w];
        holders_[key].push_back(w);
      }
    }
    for (const auto& [key, count] : pair_counts_) queue_.push({count, key});
    visited_.assign(words_.size(), -1);
  }

  // Learns merges until there are `max_tokens` tokens or no pair is seen `min_frequency` times.
  void run(int64_t max_tokens, int64_t min_frequency) {
    while (int64_t(tokens_.size()) < max_tokens && !queue_.empty()) {
      const Candidate top = queue_.top();
      queue_.pop();
      const auto it = pair_counts_.find(top.pair);
      if (it == pair_counts_.end() || it->second != top.count) continue;  // stale
      if (top.count < min_frequency) break;  // the most frequent pair left is too rare
      merge(top.pair);
    }
  }

  Tokenizer finish() {
    tokens_.emplace_back(kEndOfText);
    return Tokenizer(std::move(tokens_), merges_);
  }

 private:
  void merge(uint64_t pair) {
    const TokenId left = left_of(pair), right = right_of(pair);
    const int32_t stamp = int32_t(merges_.size());
    merges_.emplace_back(tokens_[size_t(left)], tokens_[size_t(right)]);
    // Two merges could spell one token ("a" "bc" and "ab" "c"); the second then adds a merge but no
    // token, as a vocabulary holds each text once.
    const auto [known, is_new] = ids_.emplace(tokens_[size_t(left)] + tokens_[size_t(right)], TokenId(tokens_.size()));
    const TokenId merged = known->second;
    if (is_new) tokens_.push_back(known->first);

    // Each word that holds the pair: its pairs are taken out of the counts, the word merged, and its
    // new pairs put back. Pairs the merge did not touch cancel out in `delta_`.
    delta_.clear();
    const std::vector<uint32_t> holders = std::move(holders_[pair]);
    holders_.erase(pair);
    for (const uint32_t w : holders) {
      std::vector<TokenId>& word = words_[w];
      // A word can be listed twice, or still be listed after an earlier merge took the pair away.
      if (visited_[w] == stamp || !holds_pair(word, left, right)) continue;
      visited_[w] = stamp;
      const int64_t f = frequency_[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) delta_[pair_key(word[i], word[i + 1])] -= f;
      merge_pair(word, left, right, merged);
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        const uint64_t key = pair_key(word[i], word[i + 1]);
        delta_[key] += f;
        // Only pairs with the new token are new to this word; it is already listed for the others.
        if (word[i] == merged || word[i + 1] == merged) holders_[key].push_back(w);
      }
    }
    for (const auto& [key, d] : delta_) {
      if (d == 0) continue;
      int64_t& count = pair_counts_[key];
      count += d;
      if (count > 0) {
        queue_.push({count, key});
      } else {
        // Gone for good: merges only ever take tokens away, so two old tokens never meet anew.
        pair_counts_.erase(key);
        holders_.erase(key);
      }
    }
  }

  std::vector<std::string> tokens_;  // id -> text in the byte alphabet
  std::unordered_map<std::string, TokenId> ids_;
  std::vector<std::pair<std::string, std::string>> merges_;
  std::vector<std::vector<TokenId>> words_;  // each distinct piece, as its current tokens
  std::vector<int64_t> frequency_;           // how often each piece occurs
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> holders_;  // pair -> words that may hold it
  std::priority_queue<Candidate, std::vector<Candidate>, LessUrgent> queue_;
  std::vector<int32_t> visited_;  // per word, the merge that last visited it
  std::unordered_map<uint64_t, int64_t> delta_;
};

}  // namespace

Tokenizer train_bpe(const WordCounts& words, const BpeTrainOptions& options) {
  BRIGADE_CHECK(options.vocab_size >= 257, "train_bpe: vocab_size must be at least 257 (the 256 bytes and ", kEndOfText,
                "), got ", options.vocab_size);
  BRIGADE_CHECK(options.min_frequency >= 1, "train_bpe: min_frequency must be at least 1, got ", options.min_frequency);
  BpeTrainer trainer(words);
  trainer.run(options.vocab_size - 1, options.min_frequency);  // the last id is <|endoftext|>
  return trainer.finish();
}

Tokenizer train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& options) {
  WordCounts words;
  for (const std::string& text : texts) words.add(text);
  return train_bpe(words, options);
}

}  // namespace brigade::text
