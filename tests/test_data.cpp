// data/: llm.c's token shards (data/token_shard.h) and the window loader (data/token_loader.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/token_loader.h"
#include "data/token_shard.h"
#include "temp_dir.h"

using namespace brigade;
using namespace brigade::data;
using test::TempDir;

namespace {

// A shard written byte by byte from the layout llm.c documents — independently of
// write_token_shard — so the reader is checked against the format, not against our writer.
void write_raw_shard(const std::string& path, int32_t magic, int32_t version, int32_t count,
                     const std::vector<uint32_t>& tokens, int width_bytes) {
  std::ofstream f(path, std::ios::binary);
  int32_t header[256] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  f.write(reinterpret_cast<const char*>(header), sizeof header);
  for (uint32_t t : tokens) {
    unsigned char bytes[4] = {uint8_t(t), uint8_t(t >> 8), uint8_t(t >> 16), uint8_t(t >> 24)};  // little-endian
    f.write(reinterpret_cast<const char*>(bytes), width_bytes);
  }
}

std::vector<uint32_t> random_tokens(size_t n, uint32_t below, uint64_t seed) {
  std::vector<uint32_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = philox4x32(uint64_t(i), seed)[0] % below;
  return out;
}

void require_refused(const std::string& path, const std::string& needle, int64_t vocab = 0) {
  try {
    TokenShard shard(path, vocab);
    FAIL("opened a bad shard: " << path);
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    REQUIRE(what.find(path) != std::string::npos);  // every error names the file
    REQUIRE(what.find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("token shards: llm.c's uint16 and uint32 layouts read as written by hand", "[data][shard]") {
  TempDir dir("brigade_test_data");
  const std::vector<uint32_t> small = random_tokens(1000, 50257, 1), large = random_tokens(777, 200000, 2);
  write_raw_shard(dir.file("a.bin"), 20240520, 1, int32_t(small.size()), small, 2);
  write_raw_shard(dir.file("b.bin"), 20240801, 7, int32_t(large.size()), large, 4);
  TokenShard a(dir.file("a.bin"), 50257), b(dir.file("b.bin"));
  REQUIRE(a.width() == TokenWidth::u16);
  REQUIRE(b.width() == TokenWidth::u32);
  REQUIRE(a.size() == 1000);
  REQUIRE(b.size() == 777);
  for (size_t i = 0; i < small.size(); ++i) REQUIRE(a[int64_t(i)] == small[i]);
  for (size_t i = 0; i < large.size(); ++i) REQUIRE(b[int64_t(i)] == large[i]);
  std::vector<int64_t> some(5);
  b.read(770, 5, some.data());
  for (int i = 0; i < 5; ++i) REQUIRE(some[size_t(i)] == int64_t(large[size_t(770 + i)]));
}

TEST_CASE("token shards: write_token_shard writes llm.c's bytes exactly", "[data][shard]") {
  TempDir dir("brigade_test_data");
  const std::vector<uint32_t> tokens = random_tokens(300, 65536, 3);
  write_raw_shard(dir.file("by_hand.bin"), 20240520, 1, 300, tokens, 2);
  write_token_shard(dir.file("ours.bin"), tokens, TokenWidth::u16);
  auto bytes = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  REQUIRE(bytes(dir.file("ours.bin")) == bytes(dir.file("by_hand.bin")));
  REQUIRE(dir.entries() == std::vector<std::string>{"by_hand.bin", "ours.bin"});  // no temporary left

  write_token_shard(dir.file("wide.bin"), {70000, 1, 2}, TokenWidth::u32);
  TokenShard wide(dir.file("wide.bin"));
  REQUIRE(wide[0] == 70000);
  REQUIRE(token_width_for(50257) == TokenWidth::u16);
  REQUIRE(token_width_for(65537) == TokenWidth::u32);
  REQUIRE_THROWS_WITH(write_token_shard(dir.file("narrow.bin"), {1, 70000}, TokenWidth::u16),
                      Catch::Contains("narrow.bin") && Catch::Contains("token 70000 at position 1"));
  REQUIRE(dir.entries() == std::vector<std::string>{"by_hand.bin", "ours.bin", "wide.bin"});
}

TEST_CASE("token shards: bad files are refused with the file named", "[data][shard]") {
  TempDir dir("brigade_test_data");
  const std::vector<uint32_t> tokens = {5, 6, 7, 8};
  write_raw_shard(dir.file("magic.bin"), 12345, 1, 4, tokens, 2);
  require_refused(dir.file("magic.bin"), "magic number 12345");
  write_raw_shard(dir.file("version.bin"), 20240520, 3, 4, tokens, 2);
  require_refused(dir.file("version.bin"), "version 3");
  write_raw_shard(dir.file("past_end.bin"), 20240520, 1, 5, tokens, 2);  // counts one token too many
  require_refused(dir.file("past_end.bin"), "counts 5 tokens");
  write_raw_shard(dir.file("extra.bin"), 20240520, 1, 3, tokens, 2);  // bytes after the last token
  require_refused(dir.file("extra.bin"), "counts 3 tokens");
  write_raw_shard(dir.file("vocab.bin"), 20240520, 1, 4, tokens, 2);
  require_refused(dir.file("vocab.bin"), "token 7 at position 2 is outside the vocabulary of 7", 7);
  { std::ofstream(dir.file("short.bin")) << "tiny"; }
  require_refused(dir.file("short.bin"), "shorter than the 1024-byte header");
  require_refused(dir.file("missing.bin"), "cannot open");
}

TEST_CASE("find_shards picks a split's files in name order, in llm.c's names too", "[data][shard]") {
  TempDir dir("brigade_test_data");
  for (const char* name : {"train_000001.bin", "train_000000.bin", "val_000000.bin", "fineweb_train_000002.bin",
                           "tinyshakespeare_val.bin", "trainval_000000.bin"})
    write_token_shard(dir.file(name), {1, 2}, TokenWidth::u16);
  for (const char* name : {"notes.txt", "train.txt"}) std::ofstream(dir.file(name)) << "x";
  write_raw_shard(dir.file("hellaswag_val.bin"), 20240522, 1, 1, {0}, 2);  // llm.c's eval set: not a shard
  REQUIRE(find_shards(dir.path.string(), "train") ==
          std::vector<std::string>{dir.file("fineweb_train_000002.bin"), dir.file("train_000000.bin"),
                                   dir.file("train_000001.bin")});
  REQUIRE(find_shards(dir.path.string(), "val") ==
          std::vector<std::string>{dir.file("tinyshakespeare_val.bin"), dir.file("val_000000.bin")});
  REQUIRE_THROWS_WITH(find_shards(dir.file("nowhere"), "train"), Catch::Contains("nowhere"));
}

namespace {

// Two shards whose token i is a function of (shard, i), so a window's contents say where it came from.
struct TwoShards {
  TempDir dir{"brigade_test_data"};
  std::vector<std::vector<uint32_t>> tokens;
  std::vector<std::string> paths;
  explicit TwoShards(std::vector<size_t> sizes) {
    for (size_t s = 0; s < sizes.size(); ++s) {
      tokens.push_back(random_tokens(sizes[s], 1000, 10 + s));
      paths.push_back(dir.file("train_" + std::to_string(s) + ".bin"));
      write_token_shard(paths.back(), tokens.back(), TokenWidth::u16);
    }
  }
};

// The window a stream position holds, as (shard, first token), read off the batch by matching
// contents against every candidate: an independent check of window_at.
std::vector<uint32_t> row_tokens(const TokenBatch& b, int64_t row) {
  const int64_t T = b.inputs.shape()[1];
  std::vector<uint32_t> out;
  for (int64_t t = 0; t < T; ++t) out.push_back(uint32_t(b.inputs.data<int64_t>()[row * T + t]));
  out.push_back(uint32_t(b.targets.data<int64_t>()[row * T + T - 1]));
  return out;
}

}  // namespace

TEST_CASE("loader: sequential windows of T + 1 tokens start every T tokens and never span shards",
          "[data][loader]") {
  TwoShards data({53, 21});  // T = 10: (53-1)/10 = 5 windows, (21-1)/10 = 2 windows
  TokenLoader loader(data.paths, 10, 1000, WindowOrder::sequential, 0);
  REQUIRE(loader.windows() == 7);
  REQUIRE(loader.tokens() == 74);
  const TokenBatch b = loader.batch(0, 9);  // wraps into the second epoch
  REQUIRE(b.inputs.shape() == Shape{9, 10});
  REQUIRE(b.targets.shape() == Shape{9, 10});
  const std::vector<std::pair<size_t, size_t>> expected = {{0, 0}, {0, 10}, {0, 20}, {0, 30}, {0, 40},
                                                           {1, 0}, {1, 10}, {0, 0},  {0, 10}};
  for (int64_t r = 0; r < 9; ++r) {
    const auto [s, first] = expected[size_t(r)];
    const std::vector<uint32_t> want(data.tokens[s].begin() + long(first), data.tokens[s].begin() + long(first) + 11);
    REQUIRE(row_tokens(b, r) == want);
    for (int64_t t = 0; t + 1 < 10; ++t)  // targets are the inputs shifted by one
      REQUIRE(b.targets.data<int64_t>()[r * 10 + t] == b.inputs.data<int64_t>()[r * 10 + t + 1]);
  }
}

TEST_CASE("loader: shuffled order is a permutation per epoch, fixed by the seed", "[data][loader]") {
  TwoShards data({1001, 503});
  TokenLoader a(data.paths, 10, 1000, WindowOrder::shuffled, 7), b(data.paths, 10, 1000, WindowOrder::shuffled, 7),
      other_seed(data.paths, 10, 1000, WindowOrder::shuffled, 8);
  const int64_t W = a.windows();
  REQUIRE(W == 100 + 50);
  auto starts = [&](const TokenLoader& l, int64_t first) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t p = first; p < first + W; ++p) out.emplace_back(l.window_at(p).shard, l.window_at(p).offset);
    return out;
  };
  const auto epoch0 = starts(a, 0), epoch1 = starts(a, W);
  REQUIRE(std::set<std::pair<int64_t, int64_t>>(epoch0.begin(), epoch0.end()).size() == size_t(W));  // each once
  REQUIRE(std::set<std::pair<int64_t, int64_t>>(epoch1.begin(), epoch1.end()).size() == size_t(W));
  REQUIRE(epoch0 != epoch1);                 // every epoch its own order
  REQUIRE(epoch0 == starts(b, 0));           // the same on every run
  REQUIRE(epoch0 != starts(other_seed, 0));  // and a function of the seed
  // The batch holds exactly the windows window_at names.
  const TokenBatch batch = a.batch(W - 3, 6);
  for (int64_t r = 0; r < 6; ++r) {
    const TokenLoader::Window w = a.window_at(W - 3 + r);
    const auto& src = data.tokens[size_t(w.shard)];
    REQUIRE(row_tokens(batch, r) == std::vector<uint32_t>(src.begin() + w.offset, src.begin() + w.offset + 11));
  }
}

TEST_CASE("loader: a new loader given the saved position serves what the first would have (the stream is a "
          "function of the position alone), and the replicas' slices of a step never overlap", "[data][loader]") {
  TwoShards data({2001, 1000});
  const int64_t T = 16, B = 12, R = 3, steps = 40;  // 40 steps of 12 rows cross an epoch boundary
  auto step_rows = [&](const TokenLoader& l, int64_t position) {
    // What replica r of R reads at a step starting at `position`: rows position + r * B / R onwards.
    std::vector<std::vector<uint32_t>> rows;
    for (int64_t r = 0; r < R; ++r) {
      const TokenBatch b = l.batch(position + r * (B / R), B / R);
      for (int64_t i = 0; i < B / R; ++i) rows.push_back(row_tokens(b, i));
    }
    return rows;
  };
  TokenLoader whole(data.paths, T, 1000, WindowOrder::shuffled, 3);
  std::vector<std::vector<uint32_t>> uninterrupted, resumed;
  for (int64_t s = 0; s < steps; ++s)
    for (auto& row : step_rows(whole, s * B)) uninterrupted.push_back(row);
  int64_t saved_position = 0;
  {
    TokenLoader first_half(data.paths, T, 1000, WindowOrder::shuffled, 3);
    for (int64_t s = 0; s < steps / 2; ++s, saved_position += B)
      for (auto& row : step_rows(first_half, saved_position)) resumed.push_back(row);
  }
  TokenLoader second_half(data.paths, T, 1000, WindowOrder::shuffled, 3);  // a new process, say
  for (int64_t s = steps / 2; s < steps; ++s, saved_position += B)
    for (auto& row : step_rows(second_half, saved_position)) resumed.push_back(row);
  REQUIRE(resumed == uninterrupted);
  // Within the first epoch no window is served twice, across replicas and steps alike.
  const int64_t W = whole.windows();
  REQUIRE(W < steps * B);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t p = 0; p < W; ++p) seen.emplace(whole.window_at(p).shard, whole.window_at(p).offset);
  REQUIRE(seen.size() == size_t(W));
}

TEST_CASE("loader: too little text for one window is an error naming the files, when read", "[data][loader]") {
  TwoShards data({8, 5});
  const TokenLoader empty(data.paths, 8, 1000, WindowOrder::sequential, 0);
  REQUIRE(empty.windows() == 0);
  REQUIRE_THROWS_WITH(empty.batch(0, 1),
                      Catch::Contains("train_0.bin") && Catch::Contains("not even one window of T + 1 = 9"));
  REQUIRE_THROWS_WITH(empty.check_not_empty(), Catch::Contains("not even one window"));
  REQUIRE(TokenLoader(data.paths, 7, 1000, WindowOrder::sequential, 0).windows() == 1);
  REQUIRE_THROWS_WITH(TokenLoader(data.paths, 4, 100, WindowOrder::sequential, 0),
                      Catch::Contains("outside the vocabulary of 100"));
}
