// Sharded checkpoints (nn/sharded_checkpoint.h, tools/train/sharded_save.h): written by every
// pipeline rank, atomic as a whole, and resumed under any other layout bit for bit.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nn/sharded_checkpoint.h"
#include "test_util.h"
#include "train_run.h"
#include "train/checkpoint_dir.h"
#include "train/command.h"

using namespace brigade;
namespace fs = std::filesystem;

namespace {

// /tmp/brigade_test_sharded_<name>, removed afterwards.
struct ScratchDir : test::NamedTempDir {
  explicit ScratchDir(const std::string& name) : NamedTempDir("sharded_" + name) {}
};

// A 12-step sort run small enough for a second, in the layout `layout` names. No clipping and one
// micro-batch: then every layout computes the same bits (the clip's norm would sum the ranks'
// squares in another order), which is what lets a resumed run be compared with another layout's.
std::vector<std::string> run_args(const std::vector<std::string>& layout, const std::vector<std::string>& more) {
  std::vector<std::string> args = {"--layers", "2", "--heads", "2", "--embd", "16", "--digits", "4", "--batch", "8",
                                   "--steps", "12", "--warmup", "3", "--clip", "0", "--microbatches", "1",
                                   "--log-every", "1000", "--eval", "10", "--threads", "1", "--device", "cpu",
                                   "--trace", "none", "--svg", "none", "--partition", "layers"};
  args.insert(args.end(), layout.begin(), layout.end());
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

using test::train_ok;

}  // namespace

TEST_CASE("sharded checkpoints: 4 stages -> 2 stages -> one device resumes bit for bit", "[train_sharded]") {
  ScratchDir dir("layouts");
  const std::vector<std::string> four = {"--stages", "4"}, two = {"--stages", "2"}, one = {"--stages", "0"};
  train_ok(run_args(four, {"--save", dir.file("a/"), "--save-every", "4", "--keep", "5"}));
  train_ok(run_args(two, {"--resume", dir.file("a/step-00000004"), "--save", dir.file("b/"), "--save-every", "4",
                          "--keep", "5"}));
  const std::string text = train_ok(run_args(one, {"--resume", dir.file("b/step-00000008"), "--save", dir.file("c")}));
  REQUIRE_THAT(text, Catch::Contains("resumed from " + dir.file("b/step-00000008") + " at step 8"));
  train_ok(run_args(one, {"--save", dir.file("reference")}));
  test::require_same_checkpoint(dir.file("c"), dir.file("reference"));

  // The 4-stage checkpoint: one shard per rank that holds parameters, the tied embedding in one.
  const nn::ShardedIndex index = nn::read_sharded_index(dir.file("a/step-00000004"));
  REQUIRE(index.shards.size() >= 3);
  REQUIRE(index.parameters.count("embed.wte.weight") == 1);
  int holders = 0;
  for (const auto& [shard, bytes] : index.shards) {
    const Safetensors file = load_safetensors(dir.file("a/step-00000004/" + shard));
    holders += int(file.tensors.count("model.embed.wte.weight"));
  }
  REQUIRE(holders == 1);
}

TEST_CASE("sharded checkpoints: data-parallel replicas resume under another stage count bit for bit",
          "[train_sharded]") {
  ScratchDir dir("replicas");
  const std::vector<std::string> four = {"--stages", "4", "--replicas", "2"}, two = {"--stages", "2", "--replicas", "2"};
  train_ok(run_args(four, {"--save", dir.file("a/"), "--save-every", "6", "--keep", "5"}));
  train_ok(run_args(two, {"--resume", dir.file("a/step-00000006"), "--save", dir.file("b")}));
  train_ok(run_args(two, {"--save", dir.file("reference")}));
  test::require_same_checkpoint(dir.file("b"), dir.file("reference"));
}

TEST_CASE("sharded checkpoints: a rank reads only the shards of its parameters", "[train_sharded]") {
  ScratchDir dir("partial");
  train_ok(run_args({"--stages", "2"}, {"--save", dir.file("ckpt")}));
  const std::string ckpt = dir.file("ckpt");
  const nn::Checkpoint whole = nn::load_checkpoint(ckpt);
  const nn::ShardedIndex index = nn::read_sharded_index(ckpt);
  REQUIRE(index.shards.size() == 2);
  // The parameters of the second shard, read after the first is gone: it is never opened.
  const std::string first = index.shards.begin()->first, second = std::next(index.shards.begin())->first;
  std::set<std::string> wanted;
  for (const auto& [param, shard] : index.parameters)
    if (shard == second) wanted.insert(param);
  REQUIRE(!wanted.empty());
  fs::remove(ckpt + "/" + first);
  const nn::Checkpoint part = nn::load_sharded_checkpoint(ckpt, index, &wanted);
  REQUIRE(part.model.size() == wanted.size());
  for (const std::string& param : wanted) {
    INFO(param);
    test::require_equal(part.model.at(param), whole.model.at(param));
    test::require_equal(part.optimizer.at("exp_avg." + param), whole.optimizer.at("exp_avg." + param));
  }
  for (const auto& [key, t] : part.optimizer) {
    const size_t dot = key.find('.');
    if (dot != std::string::npos) REQUIRE(wanted.count(key.substr(dot + 1)) == 1);
  }
  // And the index now says what is missing.
  REQUIRE_THROWS_WITH(nn::read_sharded_index(ckpt), Catch::Contains("shard " + ckpt + "/" + first + " is missing"));
}

TEST_CASE("sharded checkpoints: a rank that cannot write fails the save on every rank, and no index is written",
          "[train_sharded]") {
  ScratchDir dir("unwritable");
  const std::string step_dir = dir.file("run/step-00000005");
  const std::string blocked = step_dir + "/rank-00001-step-00000005.safetensors";
  fs::create_directories(blocked);  // a directory where rank 1's shard goes
  std::ostringstream out, err;
  REQUIRE(train::train_command(run_args({"--stages", "2"}, {"--save", dir.file("run/"), "--save-every", "5"}), out,
                               err) == 1);
  INFO(out.str() << err.str());
  REQUIRE_THAT(err.str(), Catch::Contains("save checkpoint " + step_dir + ": rank 1 could not write its shard " + blocked));
  REQUIRE(!fs::exists(step_dir + "/index.json"));
  REQUIRE_THAT(out.str(), !Catch::Contains("saved "));
}

TEST_CASE("sharded checkpoints: a single-file checkpoint of an older build still resumes", "[train_sharded]") {
  ScratchDir dir("legacy");
  const std::vector<std::string> layout = {"--stages", "2"};
  train_ok(run_args(layout, {"--save", dir.file("new/"), "--save-every", "6", "--keep", "5"}));
  // The same state as one file, as older builds wrote it, in a fresh checkpoint directory.
  const nn::Checkpoint six = nn::load_checkpoint(dir.file("new/step-00000006"));
  fs::create_directory(dir.file("old"));
  nn::save_checkpoint(dir.file("old/step-00000006.safetensors"), six.model, six.optimizer, six.metadata);
  const std::string text = train_ok(run_args(layout, {"--save", dir.file("old/")}));
  REQUIRE_THAT(text, Catch::Contains("resumed from " + dir.file("old/step-00000006.safetensors") + " at step 6"));
  test::require_same_checkpoint(dir.file("old/step-00000012"), dir.file("new/step-00000012"));
}

TEST_CASE("sharded checkpoints: saving a step again keeps the old checkpoint whole until the new index",
          "[train_sharded]") {
  // A finished run started again with the same --save directory resumes its last step, runs nothing,
  // and saves that step once more. Its shards take the next generation, so the old index never
  // points at a shard being rewritten: a save that fails half-way leaves the old checkpoint loadable.
  ScratchDir dir("again");
  const std::vector<std::string> two = {"--stages", "2"};
  train_ok(run_args(two, {"--save", dir.file("run/")}));
  const std::string step = dir.file("run/step-00000012");
  const nn::Checkpoint first = nn::load_checkpoint(step);
  // Rank 1 cannot write its next-generation shard: the save fails, the old checkpoint stays.
  fs::create_directories(step + "/rank-00001-step-00000012.g1.safetensors");
  std::ostringstream out, err;
  REQUIRE(train::train_command(run_args(two, {"--save", dir.file("run/")}), out, err) == 1);
  INFO(out.str() << err.str());
  REQUIRE_THAT(err.str(), Catch::Contains("rank 1 could not write its shard " + step +
                                          "/rank-00001-step-00000012.g1.safetensors"));
  const nn::Checkpoint still = nn::load_checkpoint(step);
  REQUIRE(still.model.size() == first.model.size());
  for (const auto& [name, t] : first.model) test::require_equal(still.model.at(name), t);
  // Unblocked, the save goes through under a later generation (past the failed save's leftover shard
  // too: no file there is ever overwritten), and every other shard of the directory is gone.
  fs::remove(step + "/rank-00001-step-00000012.g1.safetensors");
  train_ok(run_args(two, {"--save", dir.file("run/")}));
  const nn::ShardedIndex index = nn::read_sharded_index(step);
  REQUIRE(!index.shards.empty());
  for (const auto& [shard, bytes] : index.shards) {
    int generation = -1;
    REQUIRE(nn::parse_shard_name(shard, nullptr, nullptr, &generation));
    REQUIRE(generation == 2);  // 0: the first save; 1: the failed save's rank 0 left its shard
  }
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(step)) files += entry.path().filename() != "index.json";
  REQUIRE(files == index.shards.size());
  const nn::Checkpoint again = nn::load_checkpoint(step);
  REQUIRE(again.model.size() == first.model.size());
  for (const auto& [name, t] : first.model) test::require_equal(again.model.at(name), t);
}

TEST_CASE("sharded checkpoints: --save onto an older build's single file is refused before training",
          "[train_sharded]") {
  // Checkpoints are directories: the file would fail the first save, after all the training.
  ScratchDir dir("old_file");
  const std::string old_file = dir.file("run.safetensors");
  { std::ofstream(old_file) << "an older checkpoint"; }
  std::ostringstream out, err;
  REQUIRE(train::train_command(run_args({"--stages", "2"}, {"--save", old_file}), out, err) != 0);
  INFO(out.str() << err.str());
  REQUIRE_THAT(err.str(), Catch::Contains("--save " + old_file + ": a file is in the way") &&
                              Catch::Contains("--resume " + old_file));
  REQUIRE_THAT(out.str(), !Catch::Contains("run: 12 steps"));  // refused before the run began
}

TEST_CASE("sharded checkpoints: a first save killed half-way leaves a checkpoint path, not a directory of them",
          "[train_sharded]") {
  // `--save PATH` (no trailing '/') made PATH and was killed while writing: only a temporary shard
  // is there. PATH is still the checkpoint's own directory, so the next run saves the same way.
  ScratchDir dir("killed_first");
  const std::string path = dir.file("run");
  fs::create_directories(path);
  REQUIRE(train::is_checkpoint_dir(path));  // an empty directory: a directory of checkpoints
  { std::ofstream(path + "/rank-00000-step-00000012.safetensors.tmp.4242.0") << "half"; }
  REQUIRE(!train::is_checkpoint_dir(path));
  train_ok(run_args({"--stages", "2"}, {"--save", path}));
  REQUIRE(fs::exists(path + "/index.json"));
}

TEST_CASE("sharded checkpoints: --keep counts only checkpoints that can be resumed", "[train_sharded]") {
  // Steps 4 and 12 saved whole, step 8's save killed before its index: --keep 2 keeps 4 and 12 and
  // drops the torn 8, rather than keeping 8 and 12 and losing the only older good one.
  ScratchDir dir("keep");
  for (const char* step : {"step-00000004", "step-00000008", "step-00000012"}) {
    fs::create_directories(dir.file(step));
    std::ofstream(dir.file(std::string(step) + "/rank-00000-" + std::string(step) + ".safetensors")) << "shard";
  }
  std::ofstream(dir.file("step-00000004/index.json")) << "{}";
  std::ofstream(dir.file("step-00000012/index.json")) << "{}";
  train::prune_checkpoints(dir.path, 12, 2);
  REQUIRE(fs::exists(dir.file("step-00000004")));
  REQUIRE(fs::exists(dir.file("step-00000012")));
  REQUIRE(!fs::exists(dir.file("step-00000008")));
}
