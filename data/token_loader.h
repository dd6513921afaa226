// The loader: token shards served as fixed-length training windows.
//
// The shards' tokens are cut into windows of T + 1 tokens — the model reads the first T and learns to
// predict the last T — and windows start every T tokens, so neighbouring windows share one token and
// every token is predicted exactly once per epoch (as llm.c does). Windows never span two shards: a
// shard is usually a document collection of its own.
//
// The windows form one endless stream, epoch after epoch. Position p of the stream is window
// order[p mod W] of epoch p / W, where W is the number of windows and `order` is either 0, 1, ... W-1
// (sequential) or a permutation drawn from (seed, epoch) (shuffled: every epoch its own order, the
// same on every run and every rank). So the loader has no hidden state: what it serves is a pure
// function of the position, and the position — a count of windows — is all a checkpoint stores to
// resume exactly where the run stopped, with no window repeated or skipped.
//
// A training step of B rows starting at position p serves rows p .. p + B - 1. Data-parallel replicas
// take disjoint slices of that range (replica r of R: the rows p + r·B/R onwards), so together they
// see each window once and never overlap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/token_shard.h"

namespace brigade::data {

enum class WindowOrder { sequential, shuffled };

// Inputs and next-token targets, both [rows, T] i64 on the CPU: targets[i, t] = inputs[i, t + 1]
// within the window.
struct TokenBatch {
  Tensor inputs;
  Tensor targets;
};

class TokenLoader {
 public:
  // Opens every shard (TokenShard: checked, each token below vocab_size when that is > 0) and cuts
  // them into windows of T + 1 tokens. Shards too short for one window are allowed (windows() is then
  // 0, for the caller to decide about); reading from them throws brigade::Error naming the files.
  TokenLoader(const std::vector<std::string>& paths, int64_t T, int64_t vocab_size, WindowOrder order,
              uint64_t seed);
  ~TokenLoader();

  int64_t T() const { return T_; }
  int64_t windows() const { return total_windows_; }  // per epoch
  int64_t tokens() const { return total_tokens_; }    // in all shards
  const std::vector<std::string>& paths() const { return paths_; }
  uint32_t max_token() const;

  // Throws brigade::Error naming the shards when they hold no window at all.
  void check_not_empty() const;

  // Stream positions [first, first + rows) as a batch.
  TokenBatch batch(int64_t first, int64_t rows) const;

  // Where stream position p starts: its shard and the offset of its first token there.
  struct Window {
    int64_t shard;
    int64_t offset;
  };
  Window window_at(int64_t position) const;

 private:
  int64_t window_index(int64_t position) const;  // the window (0 .. W-1) at stream position p

  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<TokenShard>> shards_;
  std::vector<int64_t> first_window_;  // of each shard, with the total at the end
  int64_t T_;
  int64_t total_windows_ = 0;
  int64_t total_tokens_ = 0;
  WindowOrder order_;
  uint64_t seed_;
  // The shuffled order of the epoch last used (a permutation of W windows), built on first use.
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> permutation_;
};

// The permutation of 0 .. n-1 the shuffled order uses for `epoch`: Fisher-Yates driven by Philox
// (core/philox.h) keyed by `seed`, so it is the same on every machine.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace brigade::data
