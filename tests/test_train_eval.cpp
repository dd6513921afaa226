// `brigade train`'s evaluation through the pipeline's stages (tools/train/pipeline_eval.h) against
// the same weights on one device: the held-out accuracy, the validation loss and sampled tokens.
//
// The weights: a one-device run of a few steps, saved, then resumed both ways. Through the stages
// each token is chosen from logits that are bitwise one device's (tests/test_pipeline_forward.cpp),
// by the same code (nn::choose_next_token), and each validation batch is one micro-batch whose loss
// is combined as mean_loss combines them, so everything must be EXACTLY equal.
#include <catch2/catch.hpp>

#include <mutex>

#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "data/token_shard.h"
#include "nn/gpt.h"
#include "pipeline/gpt_stages.h"
#include "temp_dir.h"
#include "test_util.h"
#include "trainer_runs.h"
#include "tools/train/pipeline_eval.h"
#include "tools/train/trainer.h"

using namespace brigade;
using namespace brigade::train;

namespace {

TrainOptions sort_options() {
  TrainOptions o;
  o.layers = 2;
  o.heads = 2;
  o.embd = 16;
  o.digits = 4;
  o.batch = 16;
  o.microbatches = 1;
  o.stages = 0;
  o.steps = 150;
  o.warmup = 5;
  o.lr = 3e-3;
  o.device = Device::cpu();
  o.partition = pipeline::PartitionMethod::layers;  // whole blocks: the layers one device runs (halves may round differently)
  return o;
}

// What the leader of a pipeline of `options.stages` rank threads measures with `measure`.
template <typename T>
T leaders(const TrainOptions& options, const std::function<T(Trainer&)>& measure) {
  const int world = int(options.stages * options.replicas);
  auto comms = comm::local_group(world, Device::cpu(), comm::Milliseconds(60'000), comm::LocalSends::rendezvous);
  T result{};
  std::mutex mutex;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    auto groups = pipeline::PipelineGroups::split(comm, int(options.stages));
    Trainer trainer(options, groups.get());
    T mine = measure(trainer);
    std::lock_guard<std::mutex> lock(mutex);
    if (trainer.is_leader()) result = mine;
  });
  for (size_t i = 0; i < errors.size(); ++i) INFO("rank " << i << ": " << errors[i]);
  for (const std::string& e : errors) REQUIRE(e.empty());
  return result;
}

}  // namespace

TEST_CASE("train eval: held-out accuracy through the stages equals one device's on the same weights", "[train]") {
  test::TempDir dir("brigade_test_train_eval_sort");
  const std::string ckpt = (dir.path / "w.safetensors").string();
  TrainOptions o = sort_options();
  const TrainOptions again = test::saved_at(o, o.steps, ckpt);
  // 300 examples: two prompts (256 + 44), so two micro-batches per decoding step.
  const Accuracy single = Trainer(again).evaluate(300);
  REQUIRE(single.tokens > 0.3);  // it learnt something: a wrong token would show
  REQUIRE(single.sequences < 1);
  for (auto [schedule, stages, replicas] : std::vector<std::tuple<std::string, int, int>>{
           {"1f1b", 2, 1}, {"interleaved", 2, 1}, {"zb-v", 2, 1}, {"gpipe", 3, 1}, {"1f1b", 2, 2}}) {
    INFO(schedule << " on " << stages << " stages, " << replicas << " replica(s)");
    TrainOptions piped = again;
    piped.stages = stages;
    piped.replicas = replicas;
    piped.schedule = pipeline::parse_schedule_kind(schedule);
    piped.microbatches = 2 * stages;
    const Accuracy got = leaders<Accuracy>(piped, [](Trainer& t) { return t.evaluate(300); });
    REQUIRE(got.examples == 300);
    REQUIRE(got.sequences == single.sequences);
    REQUIRE(got.tokens == single.tokens);
  }
}

TEST_CASE("train eval: the validation loss through the stages equals one device's, bit for bit", "[train]") {
  test::TempDir dir("brigade_test_train_eval_text");
  // Bytes with some structure (a counter hash over a small alphabet), train and validation shards.
  auto text = [](size_t n, uint32_t seed) {
    std::vector<uint32_t> out;
    uint64_t x = seed;
    for (size_t i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      out.push_back(uint32_t(97 + (x >> 60) % 8));
    }
    return out;
  };
  data::write_token_shard((dir.path / "train_000000.bin").string(), text(6000, 1), data::TokenWidth::u16);
  data::write_token_shard((dir.path / "val_000000.bin").string(), text(2000, 2), data::TokenWidth::u16);
  TrainOptions o = sort_options();
  o.data = dir.path.string();
  o.vocab = 128;
  o.context = 16;
  o.batch = 8;
  o.steps = 5;
  const std::string ckpt = (dir.path / "w.safetensors").string();
  const TrainOptions again = test::saved_at(o, o.steps, ckpt);
  // 21 windows in batches of 8: the last batch is shorter (5 rows).
  const double single = Trainer(again).validation_loss(21);
  REQUIRE(std::isfinite(single));
  for (auto [schedule, stages] : std::vector<std::pair<std::string, int>>{{"1f1b", 2}, {"zb-v", 2}, {"interleaved", 2}}) {
    INFO(schedule << " on " << stages << " stages");
    TrainOptions piped = again;
    piped.stages = stages;
    piped.schedule = pipeline::parse_schedule_kind(schedule);
    piped.microbatches = 2;
    REQUIRE(leaders<double>(piped, [](Trainer& t) { return t.validation_loss(21); }) == single);
  }
}

TEST_CASE("train eval: sampling through the stages writes one device's tokens", "[train]") {
  // Trainer::sample's settings (temperature 0.8, top-k 40, a seed) on a GPT with a vocabulary
  // larger than 40, decoding past the block size (the window slides).
  nn::GPTConfig c{.vocab_size = 60, .block_size = 6, .n_layer = 3, .n_head = 2, .n_embd = 16, .seed = 3};
  nn::GenerateOptions g;
  g.temperature = 0.8;
  g.top_k = 40;
  g.seed = 11;
  g.vocab_limit = 50;
  const std::vector<Tensor> prompts = {from_vector({1, 2, 3, 4}, {2, 2}, DType::i64),
                                       from_vector({5}, {1, 1}, DType::i64)};
  nn::GPT reference(c);
  std::vector<std::vector<double>> want;
  for (const Tensor& p : prompts) want.push_back(reference.generate(p, 9, g).to_vector());
  for (const std::string kind : {"1f1b", "zb-v"}) {
    INFO(kind);
    const pipeline::Schedule schedule = pipeline::make_schedule(pipeline::parse_schedule_kind(kind), 2, 2);
    const pipeline::Partition partition = pipeline::partition_uniform(c.n_layer + 2, schedule.stages());
    auto comms = comm::local_group(2);
    std::vector<std::vector<std::vector<double>>> got(2);
    auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
      nn::GPT model(c);
      pipeline::GptStages mine = pipeline::gpt_stages(model, partition, schedule.layout, comm.rank());
      pipeline::PipelineOptions po;
      po.ties = mine.ties;
      pipeline::PipelineGroups groups;
      groups.pipeline = &comm;
      pipeline::Pipeline pipe(groups, schedule, mine.chunks, mine.loss, po);
      for (const Tensor& t : pipeline_generate(pipe, prompts, 9, c.block_size, g))
        got[size_t(comm.rank())].push_back(t.to_vector());
    });
    for (const std::string& e : errors) REQUIRE(e.empty());
    REQUIRE(got[0] == want);  // every rank decodes the same tokens
    REQUIRE(got[1] == want);
  }
}
