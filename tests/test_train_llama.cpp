// `brigade train --arch llama`: a LLaMA-style decoder trained from the command line — a pipeline with
// replicas computing one device's losses, an exact resume, its checkpoint read back by `brigade
// generate`'s loader, and the flag combinations refused with the values named. (Its falling
// validation loss on the shipped corpus is in test_train_text.cpp, beside GPT-2's on the same shards.)
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/token_shard.h"
#include "generate/saved_model.h"
#include "grammar_text.h"
#include "temp_dir.h"
#include "trainer_runs.h"
#include "train/options.h"
#include "train/trainer.h"

using namespace brigade;
using namespace brigade::train;
using test::TempDir;

namespace {

// The command line's options (parse_train_args, as `brigade train` reads them) for a CPU run that
// writes no trace or timeline.
TrainOptions parse(std::vector<std::string> args) {
  args.insert(args.end(), {"--device", "cpu", "--trace", "none", "--svg", "none"});
  return parse_train_args(args).options;
}

std::string usage_error(const std::vector<std::string>& args) {
  try {
    parse_train_args(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// DIR with train and val shards of the grammar's text, bytes as tokens.
struct TextData {
  TempDir dir{"brigade_test_train_llama"};
  TextData() {
    data::write_token_shard(dir.file("train_000000.bin"), test::grammar_text(20000, 1), data::TokenWidth::u16);
    data::write_token_shard(dir.file("val_000000.bin"), test::grammar_text(3000, 2), data::TokenWidth::u16);
  }
};

// A tiny llama on `dir`: 2 blocks 32 wide, 4 query heads sharing 2 kv heads, its own lm_head.
std::vector<std::string> tiny_llama_args(const std::string& dir) {
  return {"--data", dir, "--vocab", "256", "--context", "32", "--arch", "llama", "--layers", "2", "--heads", "4",
          "--kv-heads", "2", "--embd", "32", "--mlp-hidden", "64", "--untied", "--batch", "8", "--steps", "6",
          "--warmup", "2", "--log-every", "3", "--eval", "16", "--stages", "0"};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("train --arch llama: 2 stages x 2 replicas compute the one-device losses; a resume is exact",
          "[train_text][llama]") {
  TextData data;
  const TrainOptions one = parse(tiny_llama_args(data.dir.path.string()));
  REQUIRE(one.decoder.arch == nn::Arch::llama);
  REQUIRE(one.decoder.kv_heads == 2);
  REQUIRE(one.decoder.untied);
  SECTION("a pipeline with replicas, every stage building its own layers") {
    const TrainOptions piped = parse(plus(tiny_llama_args(data.dir.path.string()),
                                          {"--stages", "2", "--replicas", "2", "--microbatches", "2", "--schedule", "zb-v"}));
    test::require_pipelined_losses_match(one, piped);
  }
  SECTION("save at step 3, resume, run to 6 == an uninterrupted run; generate's loader builds the same llama") {
    TempDir ckpt("brigade_test_train_llama_ckpt");
    Trainer uninterrupted(one);
    test::train_to(uninterrupted, one.steps);
    const TrainOptions again = test::saved_at(one, 3, ckpt.file("k.safetensors"));
    Trainer resumed(again);
    REQUIRE(resumed.step() == 3);
    test::train_to(resumed, one.steps);
    const nn::StateDict want = uninterrupted.model().state_dict(), got = resumed.model().state_dict();
    REQUIRE(got.size() == want.size());
    REQUIRE(got.count("head.lm_head.weight"));
    for (const auto& [name, t] : want) {
      INFO(name);
      REQUIRE(got.at(name).to_vector() == t.to_vector());
    }
    // The checkpoint says which family it holds: the loader of `brigade generate` builds that model.
    const generate_cli::SavedModelInfo info = generate_cli::read_saved_model_info(ckpt.file("k.safetensors"), "");
    REQUIRE(info.config.arch == nn::Arch::llama);
    REQUIRE(info.config.n_kv_head == 2);
    REQUIRE(info.config.mlp_hidden == 64);
    REQUIRE_FALSE(info.config.tie_embeddings);
    REQUIRE(nn::GPT::whole_parameter_count(info.config) == nn::GPT::whole_parameter_count(resumed.model().config()));
    // Another family is another model: a gpt2 run cannot resume it (refused naming --arch before its
    // parameters are looked for), nor can a llama of another shape (the settings recorded are compared).
    TrainOptions gpt2 = again;
    gpt2.decoder = {};
    REQUIRE_THROWS_WITH(Trainer(gpt2), Catch::Contains("trained with --arch llama but this run has --arch gpt2"));
    TrainOptions other_theta = again;
    other_theta.decoder.rope.theta = 500000;
    REQUIRE_THROWS_WITH(Trainer(other_theta), Catch::Contains("--rope-theta 10000") && Catch::Contains("--rope-theta 5e+05"));
  }
}

TEST_CASE("train --arch: flag combinations that do not fit are refused, naming the values", "[train_text][llama]") {
  const std::vector<std::string> base = {"--data", "d", "--heads", "4", "--embd", "32"};
  REQUIRE(usage_error(plus(base, {"--arch", "mistral"})) == "--arch: expected gpt2 or llama, got 'mistral'");
  REQUIRE(usage_error(plus(base, {"--kv-heads", "2"})) ==
          "--kv-heads: a gpt2 model has as many key/value heads as heads (4); --kv-heads 2 needs --arch llama");
  REQUIRE(usage_error(plus(base, {"--arch", "llama", "--kv-heads", "3"})) ==
          "--kv-heads: 3 key/value heads do not divide --heads 4");
  REQUIRE(usage_error(plus(base, {"--untied"})) ==
          "--untied: a gpt2 model's head is tied to its token embedding; it needs --arch llama");
  REQUIRE(usage_error({"--data", "d", "--arch", "llama", "--heads", "4", "--embd", "12"}) ==
          "--heads: a llama's head dim --embd / --heads = 12 / 4 = 3 must be even (rotary positions turn pairs)");
  // As many kv heads as heads is a gpt2 as it is.
  REQUIRE(usage_error(plus(base, {"--kv-heads", "4"})) == "(no error)");
  // A llama preset brings its family; flags after it still win.
  const TrainOptions o = parse({"--data", "d", "--model", "llama-1b", "--layers", "2"});
  REQUIRE((o.decoder.arch == nn::Arch::llama && o.decoder.kv_heads == 8 && o.decoder.mlp_hidden == 8192 &&
           o.decoder.rope.theta == 500000 && o.decoder.rope.llama3 && o.layers == 2 && o.heads == 32));
}
