#include "sort_task.h"

#include <algorithm>

#include "core/error.h"
#include "core/factory.h"
#include "core/rng.h"

namespace brigade::train {

namespace {

// Each split draws from its own Philox key, so the held-out examples are never a re-run of the
// training stream, and neither reuses the key the model's initial weights are drawn with (the bare
// seed). The constants are arbitrary 64-bit numbers.
uint64_t stream_key(uint64_t seed, Split split) {
  return seed ^ (split == Split::train ? 0x5851F42D4C957F2Dull : 0x9E3779B97F4A7C15ull);
}

}  // namespace

SortTask::SortTask(int64_t digits, uint64_t seed) : digits_(digits), seed_(seed) {
  BRIGADE_CHECK(digits >= 1 && digits <= 256, "SortTask: digits must be in [1, 256], got ", digits);
}

std::vector<int64_t> SortTask::digits_of(uint64_t seed, Split split, uint64_t index) const {
  std::vector<int64_t> out(static_cast<size_t>(digits_));
  uint64_t key = stream_key(seed, split);
  for (int64_t i = 0; i < digits_; ++i) {
    // Counter = (example, position): one Philox block per digit. 2^32 mod 10 != 0 biases the
    // digits by ~1e-9, far below anything training could notice.
    uint64_t counter = index * uint64_t(digits_) + uint64_t(i);
    out[size_t(i)] = int64_t(philox4x32(counter, key)[0] % 10);
  }
  return out;
}

std::vector<int64_t> SortTask::example(uint64_t seed, Split split, uint64_t index) const {
  std::vector<int64_t> seq = digits_of(seed, split, index);
  std::vector<int64_t> sorted = seq;
  std::sort(sorted.begin(), sorted.end());
  seq.push_back(kSeparator);
  seq.insert(seq.end(), sorted.begin(), sorted.end());
  return seq;
}

SortTask::Batch SortTask::batch(uint64_t seed, Split split, uint64_t first, int64_t count) const {
  BRIGADE_CHECK(count >= 1, "SortTask::batch: count must be positive, got ", count);
  const int64_t T = sequence_length();
  std::vector<double> inputs, targets;
  inputs.reserve(size_t(count * T));
  targets.reserve(size_t(count * T));
  for (int64_t b = 0; b < count; ++b) {
    std::vector<int64_t> seq = example(seed, split, first + uint64_t(b));
    for (int64_t t = 0; t < T; ++t) {
      inputs.push_back(double(seq[size_t(t)]));
      // Position t predicts token t + 1. Tokens 1..D-1 are random digits and token D is the
      // separator; only tokens D+1..2D (the sorted digits) are graded.
      bool graded = t + 1 > digits_;
      targets.push_back(graded ? double(seq[size_t(t + 1)]) : double(kIgnore));
    }
  }
  return {from_vector(inputs, {count, T}, DType::i64), from_vector(targets, {count, T}, DType::i64)};
}

std::string SortTask::describe() const {
  // "3 1 4 1 | 1 1 3 4": the first held-out example.
  std::string s;
  for (int64_t token : example(seed_, Split::held_out, 0)) {
    if (!s.empty()) s += ' ';
    s += token == kSeparator ? std::string("|") : std::to_string(token);
  }
  return "task: sort " + std::to_string(digits_) + " digits, e.g. " + s;
}

}  // namespace brigade::train
