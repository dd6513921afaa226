#include "data/token_shard.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace brigade::data {

// The header's int32 and the tokens are little-endian on disk and read in place.
static_assert(std::endian::native == std::endian::little, "token shards are read in place: a little-endian host");

namespace {

int64_t bytes_per_token(TokenWidth w) { return w == TokenWidth::u16 ? 2 : 4; }

}  // namespace

TokenWidth token_width_for(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenWidth::u16 : TokenWidth::u32;
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, TokenWidth width) {
  const std::string who = "write_token_shard: '" + path + "'";
  BRIGADE_CHECK(tokens.size() <= size_t(INT32_MAX), who, ": ", tokens.size(),
                " tokens, more than a shard header can count (2^31 - 1); split them into several shards");
  int32_t header[256] = {};
  header[0] = width == TokenWidth::u16 ? kShardMagicU16 : kShardMagicU32;
  header[1] = width == TokenWidth::u16 ? kShardVersionU16 : kShardVersionU32;
  header[2] = int32_t(tokens.size());
  AtomicFile file(path, who);
  file.write(header, sizeof header);
  if (width == TokenWidth::u32) {
    file.write(tokens.data(), tokens.size() * 4);
  } else {
    std::vector<uint16_t> narrow(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      BRIGADE_CHECK(tokens[i] <= 0xFFFF, who, ": token ", tokens[i], " at position ", i,
                    " does not fit a uint16 shard (use the uint32 format for vocabularies over 65536)");
      narrow[i] = uint16_t(tokens[i]);
    }
    file.write(narrow.data(), narrow.size() * 2);
  }
  file.commit();
}

TokenShard::TokenShard(const std::string& path, int64_t vocab_size)
    : path_(path), file_(path, "token shard '" + path + "'") {
  const std::string who = "token shard '" + path + "'";
  const int64_t file_bytes = int64_t(file_.size());
  BRIGADE_CHECK(file_bytes >= kShardHeaderBytes, who, ": ", file_bytes,
                " bytes, shorter than the 1024-byte header of a token shard");
  int32_t header[3];
  std::memcpy(header, file_.data(), sizeof header);
  if (header[0] == kShardMagicU16) width_ = TokenWidth::u16;
  else if (header[0] == kShardMagicU32) width_ = TokenWidth::u32;
  else fail(who, ": magic number ", header[0], ", not a token shard (expected ", kShardMagicU16, " for uint16 tokens or ",
            kShardMagicU32, " for uint32, as llm.c writes them)");
  const int32_t version = width_ == TokenWidth::u16 ? kShardVersionU16 : kShardVersionU32;
  BRIGADE_CHECK(header[1] == version, who, ": version ", header[1], " with magic ", header[0], " (expected ",
                version, ")");
  BRIGADE_CHECK(header[2] >= 0, who, ": negative token count ", header[2]);
  count_ = header[2];
  const int64_t expected = kShardHeaderBytes + count_ * bytes_per_token(width_);
  BRIGADE_CHECK(expected == file_bytes, who, ": the header counts ", count_, " tokens (", expected,
                " bytes with the header) but the file has ", file_bytes, " bytes",
                expected > file_bytes ? ": truncated?" : "");
  tokens_ = file_.data() + kShardHeaderBytes;
  // One pass over every token: a shard read for training is read whole anyway, and an id outside
  // the embedding table must fail here, not as an index error in the middle of a run.
  for (int64_t i = 0; i < count_; ++i) {
    const uint32_t t = (*this)[i];
    max_token_ = std::max(max_token_, t);
    if (vocab_size > 0 && int64_t(t) >= vocab_size)
      fail(who, ": token ", t, " at position ", i, " is outside the vocabulary of ", vocab_size, " tokens");
  }
}

void TokenShard::read(int64_t first, int64_t n, int64_t* out) const {
  BRIGADE_CHECK(first >= 0 && n >= 0 && first + n <= count_, "token shard '", path_, "': tokens [", first, ", ",
                first + n, ") are outside its ", count_, " tokens");
  if (width_ == TokenWidth::u16) {
    const uint16_t* t = static_cast<const uint16_t*>(tokens_) + first;
    for (int64_t i = 0; i < n; ++i) out[i] = t[i];
  } else {
    const uint32_t* t = static_cast<const uint32_t*>(tokens_) + first;
    for (int64_t i = 0; i < n; ++i) out[i] = t[i];
  }
}

std::vector<std::string> find_shards(const std::string& dir, const std::string& split) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) fail("find_shards: cannot read directory '", dir, "': ", ec.message());
  std::vector<std::string> found;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".bin" || !e.is_regular_file()) continue;
    // The split as a word of the name: "val_000000.bin", "tinyshakespeare_val.bin" — not "trainval.bin".
    const bool named = name.rfind(split + "_", 0) == 0 || name.rfind(split + ".", 0) == 0 ||
                       name.find("_" + split + "_") != std::string::npos ||
                       name.find("_" + split + ".") != std::string::npos;
    if (!named) continue;
    // llm.c keeps other files beside its shards (hellaswag_val.bin, an evaluation set with magic
    // 20240522): only files that start like a token shard are shards.
    int32_t magic = 0;
    std::ifstream(e.path(), std::ios::binary).read(reinterpret_cast<char*>(&magic), sizeof magic);
    if (magic == kShardMagicU16 || magic == kShardMagicU32) found.push_back(e.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace brigade::data
