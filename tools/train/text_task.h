// Language modelling on token shards: the task of `brigade train --data DIR`.
//
// DIR holds llm.c-format shards (data/token_shard.h) — "train*.bin" and "val*.bin", as
// `brigade data prepare` or llm.c's own scripts write them — and, when brigade prepared it, the
// tokenizer the shards were made with (DIR/tokenizer/vocab.json and merges.txt).
//
// Training windows of `context` + 1 tokens come from the training shards in a seeded shuffled order
// (data/token_loader.h); validation reads the first windows of the validation shards in order, the
// same ones at every evaluation, so successive validation losses are comparable.
//
// The vocabulary: --vocab, else the tokenizer's, else GPT-2's 50257 (llm.c's GPT-2 shards come
// without one). The model's embedding table is then padded up to a multiple of 128 rows, as llm.c
// does (50257 -> 50304): GEMMs whose sizes are multiples of 128 fill a GPU's tiles. The padded rows
// are never targets, so training only learns to give them low probability.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/token_loader.h"
#include "task.h"
#include "text/tokenizer.h"

namespace brigade::train {

class TextTask : public Task {
 public:
  // Throws brigade::Error naming DIR when it has no training shards, a shard is bad, or a token is
  // outside the vocabulary.
  TextTask(const std::string& dir, int64_t context, int64_t vocab, uint64_t seed);

  int64_t vocab_size() const override { return padded_vocab_; }
  int64_t sequence_length() const override { return context_; }
  Batch train_batch(int64_t first, int64_t rows) const override;
  std::string describe() const override;

  int64_t tokenizer_vocab() const { return vocab_; }  // before padding
  const data::TokenLoader& train() const { return *train_; }
  // The validation shards' loader, or nullptr when DIR has none.
  const data::TokenLoader* validation() const { return val_.get(); }
  // The tokenizer in DIR/tokenizer (written there by `brigade data prepare`), if any.
  const std::optional<text::Tokenizer>& tokenizer() const { return tokenizer_; }

 private:
  std::string dir_;
  int64_t context_;
  int64_t vocab_ = 0;
  int64_t padded_vocab_ = 0;
  std::string vocab_source_;  // where vocab_ came from, for the header
  std::string validation_note_;  // why there is no validation, when there are validation shards
  std::optional<text::Tokenizer> tokenizer_;
  std::unique_ptr<data::TokenLoader> train_, val_;
};

// GPT-2's vocabulary: 50,000 merges, 256 byte tokens and <|endoftext|>.
constexpr int64_t kGpt2Vocab = 50257;

}  // namespace brigade::train
