#include "text_task.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/format.h"
#include "core/json.h"

namespace brigade::train {

int64_t vocab_json_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BRIGADE_CHECK(in, "cannot open '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  JsonLimits limits;
  limits.context = "vocab '" + path + "'";
  limits.object_root = true;
  return int64_t(parse_json(text.str(), limits).members.size());
}

TextTask::TextTask(const std::string& dir, int64_t context, int64_t vocab, uint64_t seed)
    : dir_(dir), context_(context) {
  namespace fs = std::filesystem;
  BRIGADE_CHECK(fs::is_directory(dir), "--data ", dir, ": not a directory (make one with `brigade data prepare`)");
  const std::vector<std::string> train_paths = data::find_shards(dir, "train");
  BRIGADE_CHECK(!train_paths.empty(), "--data ", dir,
                ": no training shards (files named train*.bin or *_train*.bin; `brigade data prepare` writes them)");
  const std::vector<std::string> val_paths = data::find_shards(dir, "val");

  const fs::path vocab_json = fs::path(dir) / "tokenizer" / "vocab.json";
  if (fs::exists(vocab_json)) tokenizer_dir_ = (fs::path(dir) / "tokenizer").string();
  if (vocab > 0) {
    vocab_ = vocab;
    vocab_source_ = "--vocab";
  } else if (!tokenizer_dir_.empty()) {
    vocab_ = vocab_json_size(vocab_json.string());
    vocab_source_ = "the tokenizer in " + tokenizer_dir_;
  } else {
    vocab_ = kGpt2Vocab;
    vocab_source_ = "GPT-2's (no tokenizer in " + dir + "; --vocab sets another)";
  }
  padded_vocab_ = (vocab_ + 127) / 128 * 128;
  // Tokens are checked against the real vocabulary, not the padded one: a token in the padding is a
  // shard made with another tokenizer.
  train_ = std::make_unique<data::TokenLoader>(train_paths, context, vocab_, data::WindowOrder::shuffled, seed);
  if (!val_paths.empty())
    val_ = std::make_unique<data::TokenLoader>(val_paths, context, vocab_, data::WindowOrder::sequential, seed);
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
  else os << "no validation shards";
  os << "; vocabulary " << with_commas(vocab_) << " from " << vocab_source_;
  if (padded_vocab_ != vocab_) os << ", padded to " << with_commas(padded_vocab_);
  return os.str();
}

}  // namespace brigade::train
