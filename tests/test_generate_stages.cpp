// `brigade generate --stages P`: text decoded across P pipeline stages equals one device's, token for
// token — greedy and sampled, with the KV cache and without, past the context — from the checkpoints
// generate reads: the sharded directory `brigade train --stages 4` wrote, a single-file checkpoint, and
// the same weights as Hugging Face GPT-2 (sharded, and one file); as threads and, with gloo, as
// processes under `brigade launch`. The reference is the one-device run of the same command.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "comm/run_command.h"
#include "data/token_shard.h"
#include "generate/command.h"
#include "generate/saved_model.h"
#include "grammar_text.h"
#include "nn/checkpoint.h"
#include "nn/gpt2_hf.h"
#include "nn/sharded_checkpoint.h"
#include "pipeline/gpt_decode.h"
#include "pipeline/gpt_stages.h"
#include "temp_dir.h"
#include "text/tokenizer_files.h"
#include "text/train.h"
#include "train_run.h"

using namespace brigade;
using Catch::Contains;
using test::TempDir;
using test::with;

namespace {

// A 4-block GPT trained for a few steps through 4 stages on the grammar's text, with a BPE tokenizer
// of its own, saved as a sharded checkpoint directory.
struct TrainedModel {
  TempDir work{"brigade_test_generate_stages"};
  std::string checkpoint = work.file("ckpt");
  TrainedModel() {
    std::string text;
    for (uint32_t c : test::grammar_text(20000, 11)) text += char(c);
    const text::Tokenizer tokenizer = text::train_bpe(std::vector<std::string>{text}, {.vocab_size = 300});
    text::save_tokenizer(tokenizer, work.file("data/tokenizer"));
    std::vector<uint32_t> ids;
    for (text::TokenId id : tokenizer.encode(text)) ids.push_back(uint32_t(id));
    const size_t split = ids.size() * 9 / 10;
    data::write_token_shard(work.file("data/train_000000.bin"), {ids.begin(), ids.begin() + long(split)},
                            data::TokenWidth::u16);
    data::write_token_shard(work.file("data/val_000000.bin"), {ids.begin() + long(split), ids.end()},
                            data::TokenWidth::u16);
    test::train_ok({"--data", work.file("data"), "--layers", "4", "--heads", "2", "--embd", "32", "--context", "16",
                    "--batch", "8", "--steps", "12", "--warmup", "2", "--eval", "8", "--stages", "4", "--device", "cpu",
                    "--trace", "none", "--svg", "none", "--save", checkpoint});
    REQUIRE(std::filesystem::is_directory(checkpoint));
  }
};

TrainedModel& trained() {
  static TrainedModel model;  // trained once for every case of this file
  return model;
}

// `brigade generate args`: the text it printed (without the speed line), or what it said on failure.
std::string generate(const std::vector<std::string>& args, int status = 0) {
  std::ostringstream out, err;
  const int got = generate_cli::generate_command(args, out, err);
  INFO(out.str() << err.str());
  REQUIRE(got == status);
  if (status != 0) return err.str();
  const std::string text = out.str();
  REQUIRE_THAT(text, Contains("\n--- "));
  return text.substr(0, text.find("\n--- "));
}

// 30 new tokens after a prompt of a few: past the context of 16, so the window slides too.
std::vector<std::string> run_args(const std::string& checkpoint, const std::vector<std::string>& more) {
  return with({"--checkpoint", checkpoint, "--prompt", "the cat", "--tokens", "30", "--device", "cpu"}, more);
}

}  // namespace

TEST_CASE("generate --stages: the text equals one device's, greedy and sampled, with and without the cache",
          "[generate][stages]") {
  const std::string ckpt = trained().checkpoint;
  const std::vector<std::vector<std::string>> samplings = {
      {"--temperature", "0"}, {"--temperature", "0.9", "--top-k", "20", "--seed", "7", "--samples", "2"},
      {"--temperature", "0", "--no-cache"}};
  for (const auto& sampling : samplings) {
    const std::string one = generate(run_args(ckpt, sampling));
    REQUIRE_THAT(one, Contains("the cat"));
    for (const char* P : {"2", "4"}) {
      INFO("--stages " << P << " " << sampling[1]);
      REQUIRE(generate(run_args(ckpt, with(sampling, {"--stages", P}))) == one);
    }
  }
  // The speed line says where it ran.
  std::ostringstream out, err;
  REQUIRE(generate_cli::generate_command(run_args(ckpt, {"--stages", "3"}), out, err) == 0);
  REQUIRE_THAT(out.str(), Contains("KV cache, cpu, 3 stages)"));
}

TEST_CASE("generate --stages: from a single file and from the same weights as Hugging Face GPT-2, sharded or not",
          "[generate][stages]") {
  TrainedModel& m = trained();
  const std::string one = generate(run_args(m.checkpoint, {"--temperature", "0"}));
  const generate_cli::SavedModel saved = generate_cli::load_saved_model(m.checkpoint, Device::cpu());
  // An older build's single-file checkpoint: the same weights and metadata in one file.
  const nn::ShardedIndex index = nn::read_sharded_index(m.checkpoint);
  nn::save_checkpoint(m.work.file("single.safetensors"), saved.model->state_dict(), {}, index.metadata);
  REQUIRE(generate(run_args(m.work.file("single.safetensors"), {"--temperature", "0", "--stages", "3"})) == one);
  // Hugging Face: shards of at most 40 KB (several), then one file; the tokenizer beside them.
  const std::vector<std::string> files = nn::save_hf_gpt2_dir(*saved.model, m.work.file("hf"), 40'000, saved.vocab);
  REQUIRE(files.size() > 3);
  REQUIRE(std::filesystem::exists(m.work.file("hf/" + std::string(nn::kHfIndexName))));
  const std::vector<std::string> tokenizer = {"--tokenizer", m.work.file("data/tokenizer")};
  for (const char* P : {"2", "4"})
    REQUIRE(generate(run_args(m.work.file("hf"), with(tokenizer, {"--temperature", "0", "--stages", P}))) == one);
  std::filesystem::create_directories(m.work.file("hf1"));
  nn::save_hf_gpt2(*saved.model, m.work.file("hf1/model.safetensors"), saved.vocab);
  std::ofstream(m.work.file("hf1/config.json")) << nn::hf_gpt2_config_json(saved.model->config(), saved.vocab);
  REQUIRE(generate(run_args(m.work.file("hf1/model.safetensors"), with(tokenizer, {"--temperature", "0", "--stages", "2"}))) ==
          one);
}

TEST_CASE("generate --stages: each rank reads and holds only its own layers' parameters", "[generate][stages]") {
  TrainedModel& m = trained();
  generate_cli::SavedModelInfo info = generate_cli::read_saved_model_info(m.checkpoint);
  const generate_cli::SavedModel whole = generate_cli::load_saved_model(m.checkpoint, Device::cpu());
  const std::map<std::string, Tensor> reference = whole.model->state_dict();
  const pipeline::Partition partition = pipeline::decode_partition(info.config, 4);
  size_t total = 0;
  for (int rank = 0; rank < 4; ++rank) {
    auto part = pipeline::gpt_rank_model(info.config, partition, pipeline::Layout{4, 1}, rank);
    generate_cli::load_saved_weights(info, *part);
    const std::map<std::string, Tensor> mine = part->state_dict();
    // Its layers only: the first stage has no block past its own, the last no embedding positions.
    for (const auto& [name, t] : mine) {
      INFO("rank " << rank << ": " << name);
      REQUIRE(reference.count(name));
      REQUIRE(t.to_vector() == reference.at(name).to_vector());  // the checkpoint's values
    }
    total += mine.size();
    if (rank == 0) REQUIRE(!mine.count("head.ln_f.weight"));
    if (rank == 3) REQUIRE((!mine.count("embed.wpe.weight") && mine.count("embed.wte.weight")));
  }
  // Together they hold every parameter once, but the tied table, held by the first and last stage.
  REQUIRE(total == reference.size() + 1);
}

TEST_CASE("generate --stages: clear errors for too many stages, a missing checkpoint, a wrong launch",
          "[generate][stages]") {
  TrainedModel& m = trained();
  // 4 blocks: 6 layers with the embedding and the head.
  REQUIRE_THAT(generate(run_args(m.checkpoint, {"--stages", "7"}), 1),
               Contains("--stages 7: '" + m.checkpoint + "' holds a GPT of 6 layers"));
  REQUIRE_THAT(generate(run_args(m.work.file("nowhere"), {"--stages", "2"}), 1),
               Contains(m.work.file("nowhere") + "': no such file or directory"));
  REQUIRE_THAT(generate(run_args(m.checkpoint, {"--stages", "-1"}), 2), Contains("--stages"));
}

#ifdef BRIGADE_HAVE_GLOO
TEST_CASE("generate --stages: under brigade launch, one process per stage over gloo, the same text",
          "[generate][stages][launch]") {
  TrainedModel& m = trained();
  const std::vector<std::string> sampling = {"--temperature", "0.9", "--top-k", "20", "--seed", "5"};
  const std::string one = generate(run_args(m.checkpoint, sampling));
  std::string command = std::string(BRIGADE_CLI) + " launch -n 2 -- " + BRIGADE_CLI + " generate";
  for (const std::string& a : run_args(m.checkpoint, with(sampling, {"--stages", "2"}))) command += " '" + a + "'";
  const test::CommandResult launched = test::run_command(command);
  INFO(launched.output);
  REQUIRE(launched.status == 0);
  // Only rank 0 prints the text (and the speed line after it); launch prefixes its lines.
  REQUIRE(test::count(launched.output, " tokens in ") == 1);
  std::string text;
  std::istringstream lines(launched.output);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("[rank 0] ", 0) == 0 && line.find("--- ") == std::string::npos) text += (text.empty() ? "" : "\n") + line.substr(9);
  REQUIRE(text == one);
  // Launched as 2 processes for 3 stages: refused, naming both.
  std::string wrong = std::string(BRIGADE_CLI) + " launch -n 2 -- " + BRIGADE_CLI + " generate";
  for (const std::string& a : run_args(m.checkpoint, {"--stages", "3"})) wrong += " '" + a + "'";
  const test::CommandResult refused = test::run_command(wrong);
  REQUIRE(refused.status != 0);
  REQUIRE_THAT(refused.output, Contains("launched as 2 processes but --stages 3"));
}
#endif
