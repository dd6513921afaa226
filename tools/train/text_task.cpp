#include "text_task.h"

#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/format.h"
#include "text/tokenizer_files.h"

namespace brigade::train {

TextTask::TextTask(const std::string& dir, int64_t context, int64_t vocab, uint64_t seed)
    : dir_(dir), context_(context) {
  namespace fs = std::filesystem;
  BRIGADE_CHECK(fs::is_directory(dir), "--data ", dir, ": not a directory (make one with `brigade data prepare`)");
  const std::vector<std::string> train_paths = data::find_shards(dir, "train");
  BRIGADE_CHECK(!train_paths.empty(), "--data ", dir,
                ": no training shards (files named train*.bin or *_train*.bin; `brigade data prepare` writes them)");
  const std::vector<std::string> val_paths = data::find_shards(dir, "val");

  const fs::path tokenizer_dir = fs::path(dir) / "tokenizer";
  if (fs::is_directory(tokenizer_dir)) tokenizer_ = text::load_tokenizer(tokenizer_dir.string());
  if (vocab > 0) {
    vocab_ = vocab;
    vocab_source_ = "--vocab";
    BRIGADE_CHECK(!tokenizer_ || int64_t(tokenizer_->vocab_size()) <= vocab, "--vocab ", vocab, " is smaller than the ",
                  tokenizer_->vocab_size(), " tokens of the tokenizer in ", tokenizer_dir.string());
  } else if (tokenizer_) {
    vocab_ = int64_t(tokenizer_->vocab_size());
    vocab_source_ = "the tokenizer in " + tokenizer_dir.string();
  } else {
    vocab_ = kGpt2Vocab;
    vocab_source_ = "GPT-2's (no tokenizer in " + dir + "; --vocab sets another)";
  }
  padded_vocab_ = (vocab_ + 127) / 128 * 128;
  // Tokens are checked against the real vocabulary, not the padded one: a token in the padding is a
  // shard made with another tokenizer.
  train_ = std::make_unique<data::TokenLoader>(train_paths, context, vocab_, data::WindowOrder::shuffled, seed);
  train_->check_not_empty();  // no training without a window
  if (!val_paths.empty()) {
    val_ = std::make_unique<data::TokenLoader>(val_paths, context, vocab_, data::WindowOrder::sequential, seed);
    // Validation is optional: too little of it for one window (a long --context on a small corpus)
    // is a note, not a failed run.
    if (val_->windows() == 0) {
      validation_note_ = "the validation shards hold " + with_commas(val_->tokens()) +
                         " tokens, not one window of " + std::to_string(context + 1) +
                         " (a larger --val-fraction in `brigade data prepare`, or a shorter --context): no validation loss";
      val_.reset();
    }
  }
}

Batch TextTask::train_batch(int64_t first, int64_t rows) const {
  data::TokenBatch b = train_->batch(first, rows);
  return {b.inputs, b.targets};
}

std::string TextTask::describe() const {
  std::ostringstream os;
  os << "data: " << dir_ << ", " << with_commas(train_->tokens()) << " training tokens in " << train_->paths().size()
     << " shard(s) (" << with_commas(train_->windows()) << " windows of " << context_ + 1 << " per epoch), ";
  if (val_) os << with_commas(val_->tokens()) << " validation tokens";
  else if (!validation_note_.empty()) os << validation_note_;
  else os << "no validation shards";
  os << "; vocabulary " << with_commas(vocab_) << " from " << vocab_source_;
  if (padded_vocab_ != vocab_) os << ", padded to " << with_commas(padded_vocab_);
  return os.str();
}

}  // namespace brigade::train
