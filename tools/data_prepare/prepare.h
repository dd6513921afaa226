// `brigade data prepare`: text files in, llm.c token shards out (data/token_shard.h).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <utility>
#include <vector>

#include "data_prepare/options.h"

namespace brigade::data_cli {

// Splits a token stream into training and validation tokens without sharing any: the stream is cut
// into blocks of `block` tokens and block i goes to validation when floor((i + 1) f) > floor(i f) —
// every (1/f)-th block, spread evenly over the whole stream, so that validation samples every part of
// the corpus rather than its end. Order is kept within each split.
std::pair<std::vector<uint32_t>, std::vector<uint32_t>> split_train_val(const std::vector<uint32_t>& tokens,
                                                                        double fraction, int64_t block);

// The block size prepare uses for `tokens` tokens: about a 1/8 of the validation share, between 64
// and 4096 tokens, so that even a small corpus gives validation several blocks.
int64_t split_block(int64_t tokens, double fraction);

struct PrepareSummary {
  int64_t files = 0, bytes = 0, tokens = 0, train_tokens = 0, val_tokens = 0;
  std::vector<std::string> shards;   // written
  std::vector<std::string> removed;  // stale shards of an earlier run, removed
};

// The whole command: tokenizes, splits, writes the shards and a copy of the tokenizer, removes shards
// an earlier run left beyond the new ones; progress and a summary to `out`.
PrepareSummary prepare(const PrepareOptions& options, std::ostream& out);

}  // namespace brigade::data_cli
