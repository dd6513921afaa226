// `brigade train --stages 0 --microbatches M`: gradient accumulation on one device, the exact
// reference of a pipeline with the same M. Every case runs the CLI in this process and compares
// the checkpoints it saved.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "nn/checkpoint.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train_run.h"
#include "train/command.h"
#include "train/options.h"

using namespace brigade;
using namespace brigade::train;

namespace {

// The tied embedding: its gradient is the sum of the embedding's and the head's, which a pipeline
// adds in another order (docs/pipeline.md, "Tied weights": "Not bitwise the one-device sum").
// Its weight and AdamW's two moments; its step count is exact like any other.
bool tied(const std::string& name) {
  return name == "embed.wte.weight" || name == "exp_avg.embed.wte.weight" || name == "exp_avg_sq.embed.wte.weight";
}

// A tiny GPT (2 blocks: 4 layers, enough for 4 stages), no clipping, one thread, saving to `save`.
std::vector<std::string> tiny_run(const std::string& save, int64_t steps, int64_t batch = 8) {
  return {"--layers", "2", "--heads", "2", "--embd", "16", "--digits", "4", "--batch", std::to_string(batch),
          "--steps", std::to_string(steps), "--warmup", "2", "--log-every", "1", "--eval", "10", "--clip", "0",
          "--threads", "1", "--device", "cpu", "--trace", "none", "--svg", "none", "--save", save};
}

using test::train_ok;
using test::with;

// The "loss=..." field of every progress line, as printed.
std::vector<std::string> printed_losses(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("step ", 0) == 0 && line.find("loss=") != std::string::npos)
      out.push_back(line.substr(line.find("loss="), line.find("  lr=") - line.find("loss=")));
  return out;
}

// The largest |a - b| over two tensors of one shape.
double max_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double most = 0;
  for (size_t i = 0; i < x.size(); ++i) most = std::max(most, std::abs(x[i] - y[i]));
  return most;
}

// The largest |t|, for tolerances relative to a tensor's scale.
double max_magnitude(const Tensor& t) {
  double most = 0;
  for (double v : t.to_vector()) most = std::max(most, std::abs(v));
  return most;
}

// Every model and optimizer tensor of the two checkpoints: bitwise equal, except the tied
// embedding's, which must agree within `tied_tolerance` of its largest magnitude.
void require_same_but_tied(const std::string& got_path, const std::string& expected_path, double tied_tolerance) {
  const nn::Checkpoint got = nn::load_checkpoint(got_path), expected = nn::load_checkpoint(expected_path);
  REQUIRE(got.metadata.at("step") == expected.metadata.at("step"));
  int tied_tensors = 0;
  for (auto* maps : {&got.model, &got.optimizer}) {
    const auto& reference = maps == &got.model ? expected.model : expected.optimizer;
    REQUIRE(maps->size() == reference.size());
    for (const auto& [name, tensor] : reference) {
      INFO(name);
      REQUIRE(maps->count(name) == 1);
      if (!tied(name)) {
        test::require_equal(maps->at(name), tensor);
        continue;
      }
      ++tied_tensors;
      const double scale = max_magnitude(tensor);
      CAPTURE(max_difference(maps->at(name), tensor), scale);
      REQUIRE(max_difference(maps->at(name), tensor) <= tied_tolerance * scale);
    }
  }
  REQUIRE(tied_tensors == 3);  // the weight, AdamW's two moments: the exemption covers nothing else
}

}  // namespace

TEST_CASE("gradient accumulation: --stages 0 --microbatches M saves what a pipeline with the same M saves, bit for bit",
          "[train][accumulation]") {
  // One device gathers the head's part of the tied embedding's gradient apart and adds the two totals
  // at the end, as a pipeline with the embedding and the head on two ranks does: every tensor equal,
  // step after step. Where one rank holds both (the V schedules), the pipeline adds the two uses as
  // its schedule runs them: one step equal but the tied embedding (2.6e-7 of its scale, measured),
  // and from step 2 on every tensor differs by rounding (docs/pipeline.md, "Tied weights").
  // balanced cuts blocks into their halves (residual add and norm unfused); layers keeps whole blocks.
  struct Case {
    std::string schedule;
    int stages, microbatches;
    std::string partition;
    bool tie_on_two_ranks;
  };
  const std::vector<Case> cases = {{"1f1b", 2, 2, "layers", true},         {"1f1b", 2, 4, "layers", true},
                                   {"gpipe", 2, 4, "layers", true},        {"zb-v", 2, 2, "balanced", false},
                                   {"zb-v", 2, 4, "balanced", false},      {"interleaved", 2, 4, "layers", true},
                                   {"1f1b", 4, 4, "layers", true}};
  test::TempDir dir("brigade_test_accumulation");
  for (const Case& c : cases) {
    const std::string name = c.schedule + " P=" + std::to_string(c.stages) + " M=" + std::to_string(c.microbatches) +
                             " " + c.partition;
    DYNAMIC_SECTION(name) {
      const int64_t steps = c.tie_on_two_ranks ? 3 : 1;
      const std::string M = std::to_string(c.microbatches);
      const std::string one = dir.file("one-" + M + ".safetensors"), piped = dir.file("piped.safetensors");
      const std::string one_text = train_ok(with(tiny_run(one, steps), {"--stages", "0", "--microbatches", M}));
      const std::string piped_text =
          train_ok(with(tiny_run(piped, steps), {"--stages", std::to_string(c.stages), "--schedule", c.schedule,
                                                 "--microbatches", M, "--partition", c.partition}));
      // The step's loss: the mean of the same micro-batch losses, summed in the same order.
      REQUIRE(printed_losses(one_text).size() == size_t(steps));
      REQUIRE(printed_losses(piped_text) == printed_losses(one_text));
      if (c.tie_on_two_ranks) test::require_same_checkpoint(piped, one);
      else require_same_but_tied(piped, one, 1e-6);
    }
  }
}

TEST_CASE("gradient accumulation: M micro-batches train as the whole batch does, within f32 rounding",
          "[train][accumulation]") {
  test::TempDir dir("brigade_test_accumulation_whole");
  const std::string whole = dir.file("whole.safetensors");
  // Every sort sequence grades the same number of positions, so the mean of the micro-batches' mean
  // losses is the batch's mean loss: the same gradient, summed in another order.
  const std::string whole_text = train_ok(with(tiny_run(whole, 1), {"--stages", "0"}));
  for (const std::string M : {"2", "4"}) {
    DYNAMIC_SECTION("M=" << M) {
      const std::string split = dir.file("split-" + M + ".safetensors");
      const std::string split_text = train_ok(with(tiny_run(split, 1), {"--stages", "0", "--microbatches", M}));
      REQUIRE(printed_losses(split_text) == printed_losses(whole_text));
      const nn::Checkpoint got = nn::load_checkpoint(split), expected = nn::load_checkpoint(whole);
      // After one step AdamW's first moment is 0.1 x the gradient: the gradients themselves, compared.
      int moments = 0;
      for (const auto& [name, tensor] : expected.optimizer) {
        if (name.rfind("exp_avg.", 0) != 0) continue;
        INFO(name);
        ++moments;
        const double scale = max_magnitude(tensor);
        CAPTURE(max_difference(got.optimizer.at(name), tensor), scale);
        REQUIRE(scale > 0);
        REQUIRE(max_difference(got.optimizer.at(name), tensor) <= 1e-5 * scale);
      }
      REQUIRE(moments == int(expected.model.size()));
    }
  }
}

TEST_CASE("gradient accumulation: --microbatches on one device must divide the batch; without it, the whole batch",
          "[train][accumulation]") {
  REQUIRE(parse_train_args({"--stages", "0"}).options.microbatches == 1);
  REQUIRE(parse_train_args({"--stages", "0", "--microbatches", "4"}).options.microbatches == 4);
  REQUIRE(parse_train_args({"--stages=0", "--microbatches=8"}).options.microbatches == 8);
  REQUIRE(parse_train_args({"--stages", "2"}).options.microbatches == 8);  // a pipeline's default is unchanged

  std::ostringstream out, err;
  REQUIRE(train_command({"--stages", "0", "--batch", "6", "--microbatches", "4"}, out, err) == 2);
  REQUIRE_THAT(err.str(), Catch::Contains("--microbatches: a batch of 6 sequences does not split into 4 equal "
                                          "micro-batches; make --batch a multiple of --microbatches"));
}

