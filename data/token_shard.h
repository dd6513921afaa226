// Token shards: the on-disk format of tokenized text, llm.c's.
//
// A shard is a 1024-byte header of 256 little-endian int32 — [0] the magic, [1] the version, [2] the
// number of tokens, the rest zero — followed by the tokens themselves:
//
//   magic 20240520, version 1: uint16 tokens (GPT-2's 50257-token vocabulary fits)
//   magic 20240801, version 7: uint32 tokens (llm.c's variant for larger vocabularies)
//
// Using llm.c's format as it is means the shards its preprocessing scripts write (tinyshakespeare,
// fineweb, ...) train here unchanged, and shards written here train there.
//
// Reading maps the file into memory instead of copying it: the pages are the operating system's page
// cache, shared by every process of a data-parallel job and dropped under memory pressure, never
// copies on the heap. A shard is checked completely when it is opened — header, size, and every token
// against the vocabulary (one pass over the file) — so a bad file fails at the start of a run, naming
// the file, rather than hours into it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace brigade::data {

enum class TokenWidth { u16, u32 };

constexpr int32_t kShardMagicU16 = 20240520;
constexpr int32_t kShardVersionU16 = 1;
constexpr int32_t kShardMagicU32 = 20240801;
constexpr int32_t kShardVersionU32 = 7;
constexpr int64_t kShardHeaderBytes = 256 * 4;

// The width a vocabulary of `vocab_size` tokens needs: u16 up to 65536 tokens, else u32.
TokenWidth token_width_for(int64_t vocab_size);

// Writes `tokens` as a shard at `path`, atomically (core/atomic_file.h). Throws brigade::Error naming
// the file when a token does not fit `width`, or there are more tokens than the header can count.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, TokenWidth width);

// A shard opened for reading: memory-mapped, read-only, checked.
class TokenShard {
 public:
  // Opens and checks `path`. With vocab_size > 0, every token must be below it. Throws brigade::Error
  // naming the file: not found, shorter than a header, unknown magic or version, a token count that
  // disagrees with the file's size, a token outside the vocabulary (with its position).
  explicit TokenShard(const std::string& path, int64_t vocab_size = 0);
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  TokenWidth width() const { return width_; }
  int64_t size() const { return count_; }  // tokens
  uint32_t operator[](int64_t i) const {
    return width_ == TokenWidth::u16 ? static_cast<const uint16_t*>(tokens_)[i] : static_cast<const uint32_t*>(tokens_)[i];
  }
  // Tokens [first, first + n) into out[0, n), as int64 (the model's index dtype).
  void read(int64_t first, int64_t n, int64_t* out) const;
  uint32_t max_token() const { return max_token_; }

 private:
  std::string path_;
  MappedFile file_;
  const void* tokens_ = nullptr;
  TokenWidth width_ = TokenWidth::u16;
  int64_t count_ = 0;
  uint32_t max_token_ = 0;
};

// The shards of one split in a directory, in name order: files ending in ".bin" with the split as a
// word of their name ("train_000000.bin", "fineweb_val_000000.bin", "tinyshakespeare_train.bin", not
// "trainval.bin") that begin with a shard's magic number (llm.c's hellaswag_val.bin, an evaluation
// set, does not). Empty when there are none; throws when the directory can't be read.
std::vector<std::string> find_shards(const std::string& dir, const std::string& split);

}  // namespace brigade::data
