#include "data/token_loader.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/factory.h"
#include "core/philox.h"

namespace brigade::data {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t(0));
  // Fisher-Yates from the back: slot i swaps with a uniform slot in [0, i]. The random word for slot i
  // is Philox at counter (i, epoch): one draw per slot, independent of the others. A 64-bit word
  // modulo i + 1 is biased by at most (i + 1) / 2^64: nothing a training run could notice.
  for (int64_t i = n - 1; i > 0; --i) {
    const philox::Words w = philox::philox4x32(
        philox::Words{{uint32_t(i), uint32_t(uint64_t(i) >> 32), uint32_t(epoch), uint32_t(uint64_t(epoch) >> 32)}},
        uint32_t(seed), uint32_t(seed >> 32));
    const uint64_t r = (uint64_t(w.w[0]) << 32) | w.w[1];
    std::swap(perm[size_t(i)], perm[size_t(r % uint64_t(i + 1))]);
  }
  return perm;
}

TokenLoader::TokenLoader(const std::vector<std::string>& paths, int64_t T, int64_t vocab_size, WindowOrder order,
                         uint64_t seed)
    : paths_(paths), T_(T), order_(order), seed_(seed) {
  BRIGADE_CHECK(T >= 1, "TokenLoader: the sequence length T must be at least 1, got ", T);
  BRIGADE_CHECK(!paths.empty(), "TokenLoader: no token shards given");
  first_window_.push_back(0);
  for (const std::string& path : paths) {
    shards_.push_back(std::make_unique<TokenShard>(path, vocab_size));
    const int64_t n = shards_.back()->size();
    total_tokens_ += n;
    total_windows_ += n > T ? (n - 1) / T : 0;
    first_window_.push_back(total_windows_);
  }
}

void TokenLoader::check_not_empty() const {
  if (total_windows_ > 0) return;
  std::string names;
  for (const std::string& p : paths_) names += (names.empty() ? "'" : ", '") + p + "'";
  fail("TokenLoader: ", names, " hold ", total_tokens_, " tokens, not even one window of T + 1 = ", T_ + 1,
       " tokens (in one shard); use a shorter sequence length or more text");
}

TokenLoader::~TokenLoader() = default;

uint32_t TokenLoader::max_token() const {
  uint32_t m = 0;
  for (const auto& s : shards_) m = std::max(m, s->max_token());
  return m;
}

int64_t TokenLoader::window_index(int64_t position) const {
  check_not_empty();
  BRIGADE_CHECK(position >= 0, "TokenLoader: negative stream position ", position);
  const int64_t epoch = position / total_windows_, k = position % total_windows_;
  if (order_ == WindowOrder::sequential) return k;
  if (epoch != cached_epoch_) {
    permutation_ = epoch_permutation(total_windows_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return permutation_[size_t(k)];
}

TokenLoader::Window TokenLoader::window_at(int64_t position) const {
  const int64_t w = window_index(position);
  // The shard whose window range holds w: the last first_window_ entry <= w.
  const auto it = std::upper_bound(first_window_.begin(), first_window_.end(), w);
  const int64_t shard = int64_t(it - first_window_.begin()) - 1;
  return {shard, (w - first_window_[size_t(shard)]) * T_};
}

TokenBatch TokenLoader::batch(int64_t first, int64_t rows) const {
  BRIGADE_CHECK(rows >= 1, "TokenLoader::batch: rows must be at least 1, got ", rows);
  std::vector<int64_t> window(static_cast<size_t>(T_ + 1));
  Tensor inputs = empty({rows, T_}, DType::i64), targets = empty({rows, T_}, DType::i64);
  int64_t* in = inputs.data<int64_t>();
  int64_t* out = targets.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const Window w = window_at(first + r);
    shards_[size_t(w.shard)]->read(w.offset, T_ + 1, window.data());
    std::copy(window.begin(), window.end() - 1, in + r * T_);
    std::copy(window.begin() + 1, window.end(), out + r * T_);
  }
  return {inputs, targets};
}

}  // namespace brigade::data
