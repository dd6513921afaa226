// The training task of `brigade train`: sort a short sequence of digits.
//
// Each example is one token sequence
//
//     3 1 4 1 5 9 2 6 | 1 1 2 3 4 5 6 9
//     └── digits ───┘ ^ └── sorted ───┘
//
// and the model learns next-token prediction on it. Only the sorted half is graded: the unsorted
// digits are random, so predicting them is impossible and would just add noise to the loss. Their
// targets are ignore_index (-1), and cross_entropy skips them.
//
// The data is generated, not downloaded: example number i of a stream is a pure function of
// (seed, split, i) through the Philox counter RNG. So a resumed run sees exactly the batches an
// uninterrupted run would have seen — the data loader's "state" is just the step counter — and the
// held-out split never overlaps the training stream's RNG counters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "task.h"

namespace brigade::train {

enum class Split { train, held_out };

class SortTask : public Task {
 public:
  using Batch = train::Batch;
  static constexpr int64_t kSeparator = 10;  // the '|' token; tokens 0..9 are the digits
  static constexpr int64_t kIgnore = -1;     // target value cross_entropy skips

  // `seed` picks the training stream train_batch serves (and the example describe() shows).
  explicit SortTask(int64_t digits, uint64_t seed = 0);

  int64_t digits() const { return digits_; }
  int64_t vocab_size() const override { return 11; }
  int64_t sequence_length() const override { return 2 * digits_; }  // model input length (the block size)
  Batch train_batch(int64_t first, int64_t rows) const override { return batch(seed_, Split::train, uint64_t(first), rows); }
  std::string describe() const override;

  // The unsorted digits of example `index` of a stream.
  std::vector<int64_t> digits_of(uint64_t seed, Split split, uint64_t index) const;

  // The whole token sequence (length 2 * digits + 1): digits, separator, sorted digits.
  std::vector<int64_t> example(uint64_t seed, Split split, uint64_t index) const;

  // Examples [first, first + count) as next-token pairs, each [count, sequence_length()] i64:
  // inputs = example[0 .. 2D-1], targets = example[1 .. 2D] with the unsorted part set to kIgnore.
  Batch batch(uint64_t seed, Split split, uint64_t first, int64_t count) const;

 private:
  int64_t digits_;
  uint64_t seed_;
};

}  // namespace brigade::train
