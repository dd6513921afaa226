// `brigade train --data DIR`: a GPT language model trained on token shards — validation loss, exact
// resume from the saved data position, data-parallel replicas, GPT-2 presets, --init-from and MFU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/token_shard.h"
#include "nn/checkpoint.h"
#include "nn/gpt2_hf.h"
#include "grammar_text.h"
#include "temp_dir.h"
#include "test_util.h"
#include "trainer_runs.h"
#include "data_prepare/command.h"
#include "data_prepare/prepare.h"
#include "export/command.h"
#include "generate/command.h"
#include "generate/options.h"
#include "nn/gpt_presets.h"
#include "text/byte_alphabet.h"
#include "text/tokenizer_files.h"
#include "text/tokenizer_json.h"
#include "text/train.h"
#include "tokenizer/command.h"
#include "train/command.h"
#include "train/mfu.h"
#include "train/options.h"
#include "train/text_task.h"
#include "train/trainer.h"

using namespace brigade;
using namespace brigade::train;
using test::grammar_text;
using test::TempDir;

namespace {

// DIR with train and val shards of that text.
struct TextData {
  TempDir dir{"brigade_test_train_text"};
  TextData(size_t train_bytes = 20000, size_t val_bytes = 3000) {
    data::write_token_shard(dir.file("train_000000.bin"), grammar_text(train_bytes, 1), data::TokenWidth::u16);
    data::write_token_shard(dir.file("val_000000.bin"), grammar_text(val_bytes, 2), data::TokenWidth::u16);
  }
  std::string path() const { return dir.path.string(); }
};

TrainOptions tiny_text_options(const std::string& dir) {
  TrainOptions o;
  o.data = dir;
  o.vocab = 256;
  o.context = 32;
  o.layers = 1;
  o.heads = 2;
  o.embd = 32;
  o.batch = 8;
  o.steps = 40;
  o.warmup = 5;
  o.lr = 3e-3;
  o.log_every = 10;
  o.eval_examples = 16;
  o.stages = 0;
  o.microbatches = 1;  // one device: the whole batch at once, as `--stages 0` without --microbatches
  o.device = Device::cpu();
  o.trace = o.svg = "none";
  return o;
}

void require_same_state(Trainer& a, Trainer& b) {
  nn::StateDict sa = a.model().state_dict(), sb = b.model().state_dict();
  REQUIRE(sa.size() == sb.size());
  for (auto& [name, t] : sa) {
    INFO(name);
    test::require_equal(sb.at(name), t);
  }
}

}  // namespace

TEST_CASE("train --data: the validation loss of a tiny GPT falls, and the run reports it and MFU", "[train_text]") {
  TextData data;
  TrainOptions o = tiny_text_options(data.path());
  o.steps = 60;
  o.eval_every = 30;
  std::ostringstream out;
  const TrainSummary summary = run_training(o, out);
  INFO(out.str());
  REQUIRE(summary.validation.size() == 3);  // before the first step, at 30 and at 60
  REQUIRE(summary.validation[0].first == 0);
  REQUIRE(summary.validation[2].first == 60);
  // Uniform over 256 bytes is ln 256 = 5.5; the grammar's text is far more predictable than that.
  REQUIRE(summary.validation[0].second > 4.5);
  REQUIRE(summary.validation[2].second < 0.6 * summary.validation[0].second);
  const std::string text = out.str();
  REQUIRE_THAT(text, Catch::Contains("data: " + data.path() + ", 20,000 training tokens in 1 shard(s)"));
  REQUIRE_THAT(text, Catch::Contains("validation loss"));
  REQUIRE_THAT(text, Catch::Contains("mfu="));
  REQUIRE_THAT(text, Catch::Contains("measured f32 GEMM"));
  REQUIRE_THAT(text, !Catch::Contains("held-out accuracy"));
}

TEST_CASE("train --data: save at step k, resume, run to n == an uninterrupted run; the position is saved",
          "[train_text]") {
  TextData data;
  TempDir ckpt("brigade_test_train_text_ckpt");
  const TrainOptions o = tiny_text_options(data.path());
  Trainer uninterrupted(o);
  test::train_to(uninterrupted, o.steps);
  const TrainOptions again = test::saved_at(o, 13, ckpt.file("k.safetensors"));
  REQUIRE(nn::load_checkpoint(ckpt.file("k.safetensors")).metadata.at("data_position") == std::to_string(13 * 8));
  Trainer resumed(again);
  REQUIRE(resumed.step() == 13);
  REQUIRE(resumed.data_position() == 13 * 8);
  test::train_to(resumed, o.steps);
  require_same_state(uninterrupted, resumed);
  REQUIRE(resumed.train_step() == uninterrupted.train_step());

  // The position comes from the checkpoint, not from step x batch: a checkpoint whose position was moved
  // on resumes there.
  {
    nn::Checkpoint moved = nn::load_checkpoint(ckpt.file("k.safetensors"));
    moved.metadata["data_position"] = "1000";
    nn::save_checkpoint(ckpt.file("moved.safetensors"), moved.model, moved.optimizer, moved.metadata);
    TrainOptions from_moved = o;
    from_moved.resume = ckpt.file("moved.safetensors");
    Trainer elsewhere(from_moved);
    REQUIRE(elsewhere.step() == 13);
    REQUIRE(elsewhere.data_position() == 1000);
    Trainer reference(again);  // the same weights at the saved position
    REQUIRE(elsewhere.train_step() != reference.train_step());  // other rows, another loss
  }

  // Another context is another model and another stream: refused, naming the flag.
  TrainOptions other = again;
  other.context = 16;
  REQUIRE_THROWS_WITH(Trainer(other), Catch::Contains("--context 32") && Catch::Contains("--context 16"));
}

TEST_CASE("train --data: a 2-stage pipeline with 2 data-parallel replicas computes the one-device losses",
          "[train_text]") {
  TextData data;
  TrainOptions one = tiny_text_options(data.path());
  one.steps = 4;
  TrainOptions piped = one;
  piped.stages = 2;
  piped.replicas = 2;
  piped.microbatches = 2;
  test::require_pipelined_losses_match(one, piped);
}

TEST_CASE("train --data: --init-from starts from saved weights (brigade's or Hugging Face's) at step 0, and refuses "
          "weights of another shape",
          "[train_text]") {
  TextData data;
  TempDir ckpt("brigade_test_train_text_init");
  TrainOptions o = tiny_text_options(data.path());
  Trainer trained(o);
  while (trained.step() < 5) trained.train_step();
  trained.save(ckpt.file("w.safetensors"));
  TrainOptions init = o;
  init.init_from = ckpt.file("w.safetensors");
  Trainer started(init);
  REQUIRE(started.step() == 0);
  REQUIRE(started.data_position() == 0);
  require_same_state(trained, started);
  // The same weights written in the Hugging Face layout (with the config.json that names the heads).
  nn::save_hf_gpt2(trained.model(), ckpt.file("model.safetensors"));
  std::ofstream(ckpt.file("config.json")) << R"({"n_head": 2})";
  TrainOptions from_hf = o;
  from_hf.init_from = ckpt.file("model.safetensors");
  Trainer hf_started(from_hf);
  require_same_state(trained, hf_started);
  // `brigade export` of the checkpoint: once as one file, once in shards of at most 20000 bytes
  // (several), each directory with its config.json; --init-from either gives the same weights.
  std::vector<nn::StateDict> exported;
  for (const std::string size : {"1GB", "20000"}) {
    INFO("--max-shard-size " << size);
    const std::string dir = ckpt.file("export-" + size);
    std::ostringstream out, err;
    REQUIRE(export_cli::export_command({"--checkpoint", ckpt.file("w.safetensors"), "--out", dir, "--max-shard-size", size},
                                       out, err) == 0);
    const bool sharded = size == "20000";
    REQUIRE(std::filesystem::exists(dir + "/model.safetensors.index.json") == sharded);
    REQUIRE(std::filesystem::exists(dir + "/model.safetensors") == !sharded);
    int shards = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) shards += e.path().filename().string().starts_with("model-");
    REQUIRE(shards == (sharded ? 5 : 0));
    TrainOptions from_dir = o;
    from_dir.init_from = sharded ? dir : dir + "/model.safetensors";
    Trainer dir_started(from_dir);
    REQUIRE(dir_started.step() == 0);
    require_same_state(trained, dir_started);
    exported.push_back(dir_started.model().state_dict());
  }
  for (const auto& [name, t] : exported[0]) {
    INFO(name);
    test::require_equal(exported[1].at(name), t);
  }
  init.embd = 64;
  REQUIRE_THROWS_WITH(Trainer(init), Catch::Contains("--init-from " + ckpt.file("w.safetensors")) &&
                                         Catch::Contains("do not fit this model"));
}

TEST_CASE("train --data: --init-from a Hugging Face GPT-2 takes its sizes from the directory; a shorter --context "
          "reads its first positions, and flags that disagree with it are refused",
          "[train_text]") {
  TextData data;
  TempDir ckpt("brigade_test_train_text_init_hf");
  Trainer trained(tiny_text_options(data.path()));
  trained.train_step();
  trained.save(ckpt.file("w"));
  std::ostringstream out, err;
  REQUIRE(export_cli::export_command({"--checkpoint", ckpt.file("w"), "--out", ckpt.file("hf")}, out, err) == 0);
  // No model flags at all: the layers, heads, width, context and vocabulary are the directory's.
  auto args = [&](std::vector<std::string> more) {
    std::vector<std::string> a = {"--data", data.path(), "--init-from", ckpt.file("hf"), "--stages", "0", "--batch",
                                  "8", "--steps", "1", "--device", "cpu", "--trace", "none", "--svg", "none"};
    a.insert(a.end(), more.begin(), more.end());
    return parse_train_args(a).options;
  };
  Trainer whole(args({}));
  REQUIRE(whole.model().config().block_size == 32);
  REQUIRE(whole.model().config().vocab_size == 256);
  require_same_state(trained, whole);
  Trainer shorter(args({"--context", "16"}));
  REQUIRE(shorter.model().config().block_size == 16);
  const nn::StateDict want = trained.model().state_dict(), got = shorter.model().state_dict();
  for (const auto& [name, t] : want) {
    INFO(name);
    test::require_equal(got.at(name), name == "embed.wpe.weight" ? t.slice(0, 0, 16).contiguous() : t);
  }
  auto refused = [&](std::vector<std::string> more) {
    try {
      args(more);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    FAIL("accepted");
    return std::string();
  };
  const std::string config = ckpt.file("hf") + "/config.json";
  REQUIRE_THAT(refused({"--context", "64"}), Catch::Contains("--context: 64 is longer than the 32 learned positions") &&
                                                 Catch::Contains(config));
  REQUIRE_THAT(refused({"--heads", "4"}), Catch::Contains("--heads: 4 disagrees") && Catch::Contains(config) &&
                                              Catch::Contains("n_head 2"));
  REQUIRE_THAT(refused({"--arch", "llama"}), Catch::Contains("--arch: llama disagrees"));
  REQUIRE_THAT(refused({"--rope-theta", "500"}), Catch::Contains("no rotary positions"));
  REQUIRE_THAT(refused({"--model", "gpt2"}), Catch::Contains("--model: gpt2 has --layers 12, which disagrees"));
}

TEST_CASE("train --data: bad data directories are refused, naming the directory or file", "[train_text]") {
  TextData data;
  TrainOptions o = tiny_text_options(data.path() + "/nowhere");
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("nowhere") && Catch::Contains("not a directory"));
  TempDir empty("brigade_test_train_text_empty");
  o.data = empty.path.string();
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains(empty.path.string()) && Catch::Contains("no training shards"));
  o = tiny_text_options(data.path());
  o.vocab = 100;  // the text's bytes reach 'y' = 121
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("train_000000.bin") && Catch::Contains("outside the vocabulary of 100"));
  o = tiny_text_options(data.path());
  o.context = 30000;  // longer than the training text: nothing to train on
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("train_000000.bin") && Catch::Contains("not even one window"));
  // Longer than the validation text only: the run goes on without validation, and says why.
  o.context = 4000;
  const TextTask no_validation(o.data, o.context, o.vocab, 0);
  REQUIRE(no_validation.validation() == nullptr);
  REQUIRE_THAT(no_validation.describe(), Catch::Contains("not one window of 4001") && Catch::Contains("--val-fraction"));
}

TEST_CASE("train --data: the vocabulary is padded to a multiple of 128, GPT-2's by default", "[train_text]") {
  TextData data;
  REQUIRE(TextTask(data.path(), 16, 256, 0).vocab_size() == 256);
  REQUIRE(TextTask(data.path(), 16, 200, 0).vocab_size() == 256);
  const TextTask gpt2(data.path(), 16, 0, 0);  // no tokenizer in DIR: llm.c's GPT-2 shards
  REQUIRE(gpt2.tokenizer_vocab() == 50257);
  REQUIRE(gpt2.vocab_size() == 50304);  // llm.c's padded size
}

TEST_CASE("train options: GPT-2 presets set the sizes, and explicit flags win wherever they stand", "[train_text]") {
  ParsedTrainArgs p = parse_train_args({"--data", "d", "--model", "gpt2"});
  REQUIRE(p.options.layers == 12);
  REQUIRE(p.options.heads == 12);
  REQUIRE(p.options.embd == 768);
  REQUIRE(p.options.context == 1024);
  p = parse_train_args({"--layers", "2", "--model=gpt2-xl", "--data", "d"});
  REQUIRE(p.options.layers == 2);  // given before the preset, still wins
  REQUIRE(p.options.heads == 25);
  REQUIRE(p.options.embd == 1600);
  auto error_of = [](const std::vector<std::string>& args) -> std::string {
    try {
      parse_train_args(args);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no error)";
  };
  REQUIRE_THAT(error_of({"--data", "d", "--model", "gpt5"}), Catch::Contains("--model") && Catch::Contains("gpt5"));
  // The names come from the presets themselves (nn/gpt_presets.h), which plan reads too.
  REQUIRE(error_of({"--data", "d", "--model", "gpt5"}) ==
          "--model: expected gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama-tiny or llama-1b, got 'gpt5'");
  for (const nn::GPTPreset& preset : nn::gpt_presets()) {
    const TrainOptions o = parse_train_args({"--data", "d", "--model", preset.name}).options;
    REQUIRE((o.layers == preset.n_layer && o.heads == preset.n_head && o.embd == preset.n_embd &&
             o.context == preset.block_size));
    REQUIRE((o.decoder.arch == preset.arch && o.decoder.kv_heads == preset.n_kv_head &&
             o.decoder.mlp_hidden == preset.mlp_hidden && o.decoder.rope.theta == preset.rope.theta &&
             o.decoder.untied == !preset.tie_embeddings));
  }
  REQUIRE_THAT(error_of({"--model", "gpt2"}), Catch::Contains("add --data DIR"));
  REQUIRE_THAT(error_of({"--vocab", "300"}), Catch::Contains("only with --data"));
}

TEST_CASE("generate options: --device is read into a Device, and checked only when generating", "[train_text]") {
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"--checkpoint", "lm.safetensors"});
    return generate_cli::parse_generate_args(args).options;
  };
  REQUIRE(!parse({}).device);  // auto
  REQUIRE(parse({"--device", "cuda:1"}).device == Device::cuda(1));
  REQUIRE(parse({"--device=cpu"}).device == Device::cpu());
  REQUIRE_THROWS_WITH(parse({"--device", "tpu"}), "--device: expected auto, cpu or cuda, got 'tpu'");
}

TEST_CASE("MFU: 6N + 12LCT model FLOPs per token, and the peak table", "[train_text]") {
  nn::GPTConfig c{.vocab_size = 256, .block_size = 32, .n_layer = 2, .n_head = 2, .n_embd = 16};
  nn::GPT model(c);
  // Parameters counted by hand: wte 256*16, wpe 32*16; per block: 2 LayerNorms (2*2*16), qkv
  // 16*48+48, proj 16*16+16, MLP 16*64+64 and 64*16+16; ln_f 2*16.
  const double block = 4 * 16 + (16 * 48 + 48) + (16 * 16 + 16) + (16 * 64 + 64) + (64 * 16 + 16);
  const double N = 256 * 16 + 2 * block + 2 * 16;  // without the position embedding
  REQUIRE(model.parameter_count() == int64_t(N) + 32 * 16);
  REQUIRE(training_flops_per_token(model) == 6 * N + 12 * 2 * 16 * 32);
  REQUIRE(table_peak("NVIDIA H100 80GB HBM3", DType::bf16) == Approx(989.4e12));
  REQUIRE(table_peak("NVIDIA H100 PCIe", DType::bf16) == Approx(756e12));
  REQUIRE(table_peak("NVIDIA H200", DType::f32) == Approx(66.9e12));
  REQUIRE(table_peak("Some Future GPU", DType::bf16) == 0);
  const Peak cpu = device_peak(Device::cpu(), DType::f32);
  REQUIRE(cpu.flops_per_second > 1e8);  // any CPU that runs the tests manages 0.1 GFLOP/s
}

TEST_CASE("data prepare: the split gives every token to exactly one side, in order, validation spread evenly",
          "[train_text]") {
  std::vector<uint32_t> tokens(10'000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint32_t(i);
  const auto [train, val] = data_cli::split_train_val(tokens, 0.1, 100);
  REQUIRE(train.size() + val.size() == tokens.size());
  REQUIRE(val.size() == 1000);  // every 10th block of 100
  std::vector<uint32_t> both = train;
  both.insert(both.end(), val.begin(), val.end());
  std::sort(both.begin(), both.end());
  REQUIRE(both == tokens);  // nothing lost, nothing shared
  REQUIRE(std::is_sorted(train.begin(), train.end()));
  REQUIRE(std::is_sorted(val.begin(), val.end()));
  REQUIRE(val.front() == 900);  // block 9 is the first: floor(10 * 0.1) > floor(9 * 0.1)
  REQUIRE(val.back() == 9999);  // and the last block too: validation samples the whole stream
  REQUIRE(data_cli::split_train_val(tokens, 0, 100).second.empty());
  REQUIRE(data_cli::split_block(1'000'000, 0.1) == 4096);
  REQUIRE(data_cli::split_block(1000, 0.1) == 64);
}

TEST_CASE("language modelling end to end: data prepare, train --data, then generate from the checkpoint alone",
          "[train_text]") {
  TempDir work("brigade_test_lm");
  // The corpus: three "documents" of the grammar's text, and a tokenizer trained on them.
  std::vector<std::string> files;
  for (int d = 0; d < 3; ++d) {
    std::string text;
    for (uint32_t c : grammar_text(8000, uint64_t(10 + d))) text += char(c);
    files.push_back(work.file("doc" + std::to_string(d) + ".txt"));
    std::ofstream(files.back()) << text;
  }
  text::WordCounts words;
  for (const std::string& f : files) words.add_file(f);
  text::save_tokenizer(text::train_bpe(words, {.vocab_size = 300}), work.file("tok"));
  // A stale shard of an earlier, larger run: prepare must not leave it to be read with the new ones.
  std::filesystem::create_directories(work.file("data"));
  data::write_token_shard(work.file("data/train_000007.bin"), {1, 2, 3}, data::TokenWidth::u16);

  std::ostringstream out, err;
  std::vector<std::string> prepare = {"prepare", "--tokenizer", work.file("tok"), "--out", work.file("data"),
                                      "--val-fraction", "0.1"};
  prepare.insert(prepare.end(), files.begin(), files.end());
  REQUIRE(data_cli::data_command(prepare, out, err) == 0);
  INFO(out.str() << err.str());
  REQUIRE_THAT(out.str(), Catch::Contains("corpus: 3 files, 24,000 bytes"));
  REQUIRE_THAT(out.str(), Catch::Contains("removed " + work.file("data/train_000007.bin")));
  REQUIRE(!std::filesystem::exists(work.file("data/train_000007.bin")));
  const data::TokenShard train_shard(work.file("data/train_000000.bin")), val_shard(work.file("data/val_000000.bin"));
  const text::Tokenizer tokenizer = text::load_tokenizer(work.file("data/tokenizer"));
  REQUIRE(train_shard[0] == uint32_t(tokenizer.eot_id()));  // every document starts with <|endoftext|>
  REQUIRE(val_shard.size() > 0);

  std::ostringstream train_out, train_err;
  REQUIRE(train_command({"--data", work.file("data"), "--context", "32", "--layers", "1", "--heads", "2", "--embd",
                         "32", "--batch", "8", "--steps", "30", "--warmup", "5", "--log-every", "10", "--eval", "8",
                         "--stages", "0", "--device", "cpu", "--save", work.file("lm.safetensors")},
                        train_out, train_err) == 0);
  INFO(train_out.str() << train_err.str());
  REQUIRE_THAT(train_out.str(), Catch::Contains("vocabulary 300 from the tokenizer in"));
  REQUIRE_THAT(train_out.str(), Catch::Contains("padded to 384"));
  REQUIRE_THAT(train_out.str(), Catch::Contains("sample (64 tokens"));

  // A --vocab larger than the tokenizer's: the sample still only uses ids the tokenizer can decode.
  {
    std::ostringstream o, e;
    REQUIRE(train_command({"--data", work.file("data"), "--vocab", "1000", "--context", "32", "--layers", "1",
                           "--heads", "2", "--embd", "32", "--batch", "8", "--steps", "2", "--stages", "0",
                           "--device", "cpu", "--eval", "8"},
                          o, e) == 0);
    INFO(o.str() << e.str());
    REQUIRE_THAT(o.str(), Catch::Contains("sample (64 tokens"));
  }

  // The checkpoint is all generate needs; greedy with and without the KV cache write the same text.
  auto generate = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--checkpoint", work.file("lm.safetensors"), "--prompt", "the cat", "--tokens",
                                     "12", "--temperature", "0", "--device", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::ostringstream o, e;
    REQUIRE(generate_cli::generate_command(args, o, e) == 0);
    INFO(e.str());
    const std::string text = o.str();
    return text.substr(0, text.find("\n--- "));
  };
  const std::string cached = generate({});
  REQUIRE(cached.rfind("the cat", 0) == 0);
  REQUIRE(cached.size() > std::string("the cat").size());
  REQUIRE(generate({"--no-cache"}) == cached);
  // The same weights as Hugging Face GPT-2 files, with the tokenizer beside them: the same text.
  {
    Trainer reloaded([&] {
      TrainOptions o = tiny_text_options(work.file("data"));
      o.vocab = 0;
      o.resume = work.file("lm.safetensors");
      o.steps = 30;
      o.batch = 8;
      return o;
    }());
    std::filesystem::create_directories(work.file("hf"));
    nn::save_hf_gpt2(reloaded.model(), work.file("hf/model.safetensors"), 300);
    std::ofstream(work.file("hf/config.json")) << R"({"n_head": 2})";
  }
  std::vector<std::string> hf = {"--checkpoint", work.file("hf/model.safetensors"), "--tokenizer", work.file("tok"),
                                 "--prompt", "the cat", "--tokens", "12", "--temperature", "0", "--device", "cpu"};
  std::ostringstream o, e;
  REQUIRE(generate_cli::generate_command(hf, o, e) == 0);
  REQUIRE(o.str().substr(0, o.str().find("\n--- ")) == cached);
  // Without a tokenizer a Hugging Face file cannot be read as text.
  hf.erase(hf.begin() + 2, hf.begin() + 4);
  std::ostringstream o2, e2;
  REQUIRE(generate_cli::generate_command(hf, o2, e2) == 1);
  REQUIRE_THAT(e2.str(), Catch::Contains("carries no tokenizer"));
  // With the tokenizer beside the weights, as a Hugging Face model directory has it (here as a
  // tokenizer.json), no --tokenizer is needed.
  std::ofstream(work.file("hf/tokenizer.json")) << text::tokenizer_json(tokenizer);
  std::ostringstream o3, e3;
  REQUIRE(generate_cli::generate_command(hf, o3, e3) == 0);
  REQUIRE(o3.str().substr(0, o3.str().find("\n--- ")) == cached);
}

TEST_CASE("data prepare: a tokenizer.json directory (LLaMA 3's pattern, special tokens) encodes the files with it "
          "and is copied as tokenizer.json", "[train_text]") {
  TempDir work("brigade_test_prepare_json");
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(text::bytes_to_symbols(std::string(1, char(b))));
  tokens.push_back("\u0120the");  // Ġthe
  tokens.push_back("<|begin_of_text|>");
  text::TokenizerRules rules;
  rules.split = text::SplitPattern::llama3;
  rules.ignore_merges = true;  // " the" is a token no merge makes
  rules.added = {{257, "<|begin_of_text|>", true}};
  const text::Tokenizer tokenizer(tokens, {}, {}, rules);
  std::filesystem::create_directories(work.file("hf"));
  std::ofstream(work.file("hf/tokenizer.json")) << text::tokenizer_json(tokenizer);
  const std::vector<std::string> docs = {"In the year 12345 THEY'LL see the\n\n<|begin_of_text|>sea.",
                                         "the \xFF bytes"};
  std::vector<std::string> files;
  std::vector<uint32_t> expected;
  for (size_t d = 0; d < docs.size(); ++d) {
    files.push_back(work.file("doc" + std::to_string(d) + ".txt"));
    std::ofstream(files.back(), std::ios::binary) << docs[d];
    // No <|endoftext|> in this vocabulary: documents follow each other; special text stays text.
    for (const text::TokenId id : tokenizer.encode(docs[d])) expected.push_back(uint32_t(id));
  }
  // " the", a whole piece twice (not "the" at the start of the second file), is one token (256).
  REQUIRE(std::count(expected.begin(), expected.end(), 256u) == 2);
  std::vector<std::string> args = {"prepare", "--tokenizer", work.file("hf"), "--out", work.file("data"),
                                   "--val-fraction", "0"};
  args.insert(args.end(), files.begin(), files.end());
  std::ostringstream out, err;
  REQUIRE(data_cli::data_command(args, out, err) == 0);
  INFO(out.str() << err.str());
  REQUIRE_THAT(out.str(), Catch::Contains("wrote " + work.file("data/tokenizer") + "/ (tokenizer.json)"));
  const data::TokenShard shard(work.file("data/train_000000.bin"));
  std::vector<uint32_t> got;
  for (int64_t i = 0; i < shard.size(); ++i) got.push_back(shard[i]);
  REQUIRE(got == expected);
  const text::Tokenizer copied = text::load_tokenizer(work.file("data/tokenizer"));
  REQUIRE(copied.split_pattern() == text::SplitPattern::llama3);
  REQUIRE(copied.encode("<|begin_of_text|>", text::SpecialText::as_token) == std::vector<text::TokenId>{257});
}

TEST_CASE("the shipped corpus: the README's commands, CI-sized, on docs/*.md give a falling validation loss (GPT-2 "
          "and llama)",
          "[train_text]") {
  // The project's own documentation is the demo corpus: it ships with the sources, so CI trains on it
  // as a user would, only smaller (a 512-token vocabulary, a tiny model, 200 steps).
  std::vector<std::string> docs;
  for (const auto& e : std::filesystem::directory_iterator(std::string(BRIGADE_SOURCE_ROOT) + "/docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path().string());
  std::sort(docs.begin(), docs.end());
  REQUIRE(docs.size() >= 10);
  TempDir work("brigade_test_shipped_corpus");
  auto run = [](int (*command)(const std::vector<std::string>&, std::ostream&, std::ostream&),
                std::vector<std::string> args, const std::vector<std::string>& files) {
    args.insert(args.end(), files.begin(), files.end());
    std::ostringstream out, err;
    const int status = command(args, out, err);
    INFO(out.str() << err.str());
    REQUIRE(status == 0);
    return out.str();
  };
  run(tokenizer_cli::tokenizer_command, {"train", "--vocab", "512", "--out", work.file("tok")}, docs);
  run(data_cli::data_command, {"prepare", "--tokenizer", work.file("tok"), "--out", work.file("data")}, docs);
  TrainOptions o = tiny_text_options(work.file("data"));
  o.vocab = 0;
  o.context = 64;
  o.embd = 64;
  o.heads = 4;
  o.layers = 2;
  o.batch = 16;
  o.steps = 200;
  o.lr = 4e-3;
  o.warmup = 10;
  o.eval_every = 200;
  o.eval_examples = 32;
  std::ostringstream out;
  const TrainSummary summary = run_training(o, out);
  INFO(out.str());
  REQUIRE(summary.validation.size() == 2);
  REQUIRE(summary.validation[0].second > 6.0);                                 // about ln 512 = 6.2
  // Clearly falling: 200 steps reach about the corpus's unigram entropy (5.0-5.4 nats, depending
  // on the docs' text, which every docs edit changes), while a model that learned nothing stays
  // at ln 512. 0.9 x 6.2 = 5.6 sits between the two with room on both sides; 0.85 did not.
  REQUIRE(summary.validation[1].second < 0.9 * summary.validation[0].second);
  REQUIRE_THAT(out.str(), Catch::Contains("sample (64 tokens"));

  // A LLaMA-style model of the same size on the same shards, from the command line's flags, through a
  // 2-stage pipeline: its validation loss falls past the same mark (150 steps).
  TrainOptions llama = parse_train_args({"--data", work.file("data"), "--arch", "llama", "--kv-heads", "2", "--heads", "4",
                                         "--embd", "64", "--layers", "2", "--context", "64", "--batch", "16", "--steps",
                                         "150", "--lr", "4e-3", "--warmup", "10", "--eval-every", "150", "--eval", "32",
                                         "--stages", "2", "--microbatches", "2", "--device", "cpu", "--trace", "none",
                                         "--svg", "none"}).options;
  std::ostringstream llama_out;
  const TrainSummary llama_summary = run_training(llama, llama_out);
  INFO(llama_out.str());
  REQUIRE(llama_summary.validation.size() == 2);
  REQUIRE(llama_summary.validation[0].second > 6.0);
  REQUIRE(llama_summary.validation[1].second < 0.9 * llama_summary.validation[0].second);
  REQUIRE_THAT(llama_out.str(), Catch::Contains("model: llama (2 kv heads, MLP 256, tied), 2 layers, 4 heads, 64 wide"));
}
