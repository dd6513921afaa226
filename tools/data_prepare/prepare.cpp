#include "data_prepare/prepare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <regex>

#include "core/error.h"
#include "core/format.h"
#include "core/read_file.h"
#include "data/token_shard.h"
#include "text/tokenizer_files.h"

namespace brigade::data_cli {

namespace fs = std::filesystem;

std::pair<std::vector<uint32_t>, std::vector<uint32_t>> split_train_val(const std::vector<uint32_t>& tokens,
                                                                        double fraction, int64_t block) {
  BRIGADE_CHECK(block >= 1, "split_train_val: block must be at least 1, got ", block);
  std::vector<uint32_t> train, val;
  for (size_t first = 0, i = 0; first < tokens.size(); first += size_t(block), ++i) {
    const bool to_val = std::floor(double(i + 1) * fraction) > std::floor(double(i) * fraction);
    std::vector<uint32_t>& into = to_val ? val : train;
    into.insert(into.end(), tokens.begin() + long(first), tokens.begin() + long(std::min(tokens.size(), first + size_t(block))));
  }
  return {train, val};
}

int64_t split_block(int64_t tokens, double fraction) {
  return std::clamp(int64_t(double(tokens) * fraction / 8), int64_t(64), int64_t(4096));
}

namespace {

// Writes `tokens` as <prefix>_000000.bin, <prefix>_000001.bin, ... in `dir`, each at most `per_shard`.
void write_shards(const std::vector<uint32_t>& tokens, const fs::path& dir, const std::string& prefix,
                  int64_t per_shard, data::TokenWidth width, PrepareSummary& summary) {
  for (size_t first = 0, n = 0; first < tokens.size(); first += size_t(per_shard), ++n) {
    char name[64];
    std::snprintf(name, sizeof name, "%s_%06zu.bin", prefix.c_str(), n);
    const auto end = tokens.begin() + long(std::min(tokens.size(), first + size_t(per_shard)));
    const std::string path = (dir / name).string();
    data::write_token_shard(path, std::vector<uint32_t>(tokens.begin() + long(first), end), width);
    summary.shards.push_back(path);
  }
}

}  // namespace

PrepareSummary prepare(const PrepareOptions& o, std::ostream& out) {
  const auto start = std::chrono::steady_clock::now();
  const text::Tokenizer tokenizer = text::load_tokenizer(o.tokenizer);
  out << "tokenizer: " << o.tokenizer << ", " << with_commas(int64_t(tokenizer.vocab_size())) << " tokens\n";

  // Each file is one document, and like llm.c's preprocessing every document starts with
  // <|endoftext|>: the model learns that it begins something new, and generation can be prompted
  // with it.
  PrepareSummary summary;
  std::vector<uint32_t> tokens;
  for (const std::string& path : o.files) {
    const std::string text = read_file(path, "brigade data prepare");
    if (tokenizer.has_eot()) tokens.push_back(uint32_t(tokenizer.eot_id()));
    for (text::TokenId id : tokenizer.encode(text)) tokens.push_back(uint32_t(id));
    summary.bytes += int64_t(text.size());
    ++summary.files;
  }
  summary.tokens = int64_t(tokens.size());
  out << "corpus: " << summary.files << " file" << (summary.files == 1 ? "" : "s") << ", "
      << with_commas(summary.bytes) << " bytes, " << with_commas(summary.tokens) << " tokens ("
      << format_fixed(summary.tokens > 0 ? double(summary.bytes) / double(summary.tokens) : 0.0, 2)
      << " bytes/token)\n";

  const auto [train, val] = split_train_val(tokens, o.val_fraction, split_block(summary.tokens, o.val_fraction));
  summary.train_tokens = int64_t(train.size());
  summary.val_tokens = int64_t(val.size());
  BRIGADE_CHECK(!train.empty(), "brigade data prepare: no training tokens (the files are empty?)");
  BRIGADE_CHECK(o.val_fraction == 0 || !val.empty(), "brigade data prepare: the corpus (", summary.tokens,
                " tokens) is too small for a validation split of ", o.val_fraction);

  const fs::path dir(o.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  BRIGADE_CHECK(!ec && fs::is_directory(dir), "brigade data prepare: cannot create --out ", o.out, ": ", ec.message());
  // The tokenizer first, then the shards, then what an earlier run left: every file is written
  // atomically, but a run that fails part-way leaves a mix of old and new — run it again.
  const std::string tokenizer_files = text::save_tokenizer(tokenizer, (dir / "tokenizer").string());
  const data::TokenWidth width = data::token_width_for(int64_t(tokenizer.vocab_size()));
  write_shards(train, dir, "train", o.shard_tokens, width, summary);
  write_shards(val, dir, "val", o.shard_tokens, width, summary);

  // Shards of an earlier, larger run in the same directory would be read as part of this one.
  const std::regex ours(R"((train|val)_\d{6}\.bin)");
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string path = e.path().string(), name = e.path().filename().string();
    if (std::regex_match(name, ours) && std::find(summary.shards.begin(), summary.shards.end(), path) == summary.shards.end()) {
      fs::remove(e.path());
      summary.removed.push_back(path);
    }
  }

  out << "split: " << with_commas(summary.train_tokens) << " training and " << with_commas(summary.val_tokens)
      << " validation tokens (" << format_fixed(100.0 * double(summary.val_tokens) / double(summary.tokens), 1)
      << "%)\n";
  for (const std::string& s : summary.shards) out << "wrote " << s << "\n";
  for (const std::string& s : summary.removed) out << "removed " << s << " (left by an earlier run)\n";
  out << "wrote " << (dir / "tokenizer").string() << "/ (" << tokenizer_files << ")\n";
  out << "time: " << format_fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2)
      << " s\n";
  return summary;
}

}  // namespace brigade::data_cli
