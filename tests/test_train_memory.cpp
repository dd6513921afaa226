// `brigade train`'s memory report: on the CPU each rank's measured peak over the last step is within
// 10% of the prediction, or within a few boundary messages of it (pipeline/analysis/memory.h,
// tools/train/memory_report.h).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>
#include <string>

#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "core/format.h"
#include "core/memory_context.h"
#include "pipeline/runtime.h"
#include "train/device_memory.h"  // tools/train/
#include "train/memory_report.h"
#include "train/options.h"
#include "train/trainer.h"

using namespace brigade;
using namespace brigade::train;

namespace {

// Each rank line's "measured/predicted" ratio, and the parameters it trains ("12,704 parameters
// (49.6 KiB)"), in rank order.
std::vector<double> ratios(const std::string& text, std::vector<std::string>* parameters = nullptr) {
  std::vector<double> out;
  const std::regex line(
      R"(  rank (\d+): predicted [^\n]*, measured [^\n]*, measured/predicted ([0-9.]+); ([0-9,]+ parameters \([^)]*\))\n)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it) {
    REQUIRE(std::stoi((*it)[1]) == int(out.size()));
    out.push_back(std::stod((*it)[2]));
    if (parameters) parameters->push_back((*it)[3]);
  }
  return out;
}

// "55.9 KiB", "64 B", "1.2 MiB" -> bytes.
double bytes_of(const std::string& amount, const std::string& unit) {
  const double scale = unit == "B" ? 1 : unit == "KiB" ? 1024.0 : unit == "MiB" ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
  return std::stod(amount) * scale;
}

// Each rank line's predicted and measured peak in bytes, in rank order.
std::vector<std::pair<double, double>> peaks(const std::string& text) {
  std::vector<std::pair<double, double>> out;
  const std::regex line(R"(  rank (\d+): predicted ([0-9.]+) (B|KiB|MiB|GiB) [^\n]*, measured ([0-9.]+) (B|KiB|MiB|GiB), )");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it) {
    REQUIRE(std::stoi((*it)[1]) == int(out.size()));
    out.emplace_back(bytes_of((*it)[2], (*it)[3]), bytes_of((*it)[4], (*it)[5]));
  }
  return out;
}

// The sort task on a 2-block GPT, 32 wide, batches of 8, on the CPU.
TrainOptions small_sort_options() {
  TrainOptions o;
  o.layers = 2;
  o.heads = 2;
  o.embd = 32;
  o.digits = 4;
  o.batch = 8;
  o.device = Device::cpu();
  return o;
}

}  // namespace

TEST_CASE("train: each rank's measured peak memory is within 10% of the prediction", "[train][memory]") {
  for (const char* schedule : {"1f1b", "gpipe", "zb-h1"}) {
    for (bool recompute : {false, true}) {
      TrainOptions o = small_sort_options();  // 4 layers (embedding, 2 blocks, head) for the 4 stages
      o.batch = 32;
      o.steps = 3;
      o.warmup = 1;
      o.eval_examples = 10;
      o.schedule = pipeline::parse_schedule_kind(schedule);
      o.recompute = recompute;
      o.trace = o.svg = "none";
      std::ostringstream out;
      run_training(o, out);
      INFO(schedule << (recompute ? " with recomputation" : "") << "\n" << out.str());
      REQUIRE_THAT(out.str(), Catch::Contains("memory (last step, host)"));
      std::vector<std::string> parameters;
      const std::vector<double> r = ratios(out.str(), &parameters);
      REQUIRE(r.size() == 4);
      // Each rank holds only its own layers, so the end stages' peaks are a few tens of KiB (the
      // head's: an 11 x 32 table, a norm, a micro-batch's logits), and there the prediction's
      // absolute error shows: the peak moves with thread timing on shared cores (how long a
      // receiver takes to copy a gradient sent to it) by a message or three — by up to 12 KiB on
      // the head's rank under gpipe with recomputation, as it did when every rank also held the
      // whole model (~100 KiB more, which kept the ratio within 10%). So: within 10%, or within
      // four messages of one micro-batch's activations (4 sequences x 8 tokens x 32 wide, f32).
      const double message = 4.0 * 8 * 32 * 4;
      const auto p = peaks(out.str());
      REQUIRE(p.size() == 4);
      for (size_t rank = 0; rank < p.size(); ++rank) {
        const auto [predicted, measured] = p[rank];
        INFO("rank " << rank << ": predicted " << predicted << " B, measured " << measured << " B (ratio "
                     << r[rank] << ")");
        CHECK(std::abs(measured - predicted) <= std::max(0.1 * predicted, 4 * message));
      }
      // Ranks 1 and 2 train one transformer block each: 12 e² + 13 e parameters of 4 bytes (e = 32:
      // two layer norms, the attention's qkv and projection, the MLP's two layers, with biases).
      CHECK(parameters[1] == "12,704 parameters (49.6 KiB)");
      CHECK(parameters[2] == "12,704 parameters (49.6 KiB)");
    }
  }
}

TEST_CASE("train: --memory-budget bounds what each rank holds, and too little says how much would fit",
          "[train][memory]") {
  TrainOptions o;
  o.steps = 3;
  o.warmup = 1;
  o.eval_examples = 10;
  o.device = Device::cpu();
  o.partition = pipeline::PartitionMethod::balanced;
  o.trace = o.svg = "none";
  // Too little: the error names the least budget that fits; that one trains, and every rank's
  // measured peak stays within it (the estimate is brigade plan's, an upper bound by construction).
  o.memory_budget = 1 << 20;
  std::string error;
  try {
    std::ostringstream out;
    run_training(o, out);
  } catch (const Error& e) {
    error = e.what();
  }
  INFO(error);
  std::smatch least;
  REQUIRE(std::regex_search(error, least, std::regex(R"(the least that fits is about ([0-9.]+) MiB)")));
  o.memory_budget = int64_t(std::stod(least[1]) * 1.05 * (1 << 20));
  std::ostringstream out;
  run_training(o, out);
  const std::string text = out.str();
  INFO(text);
  const std::regex measured(R"(  rank \d+: predicted [^\n]*, measured ([0-9.]+) (KiB|MiB), )");
  int ranks = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), measured); it != std::sregex_iterator(); ++it) {
    const double bytes = std::stod((*it)[1]) * ((*it)[2] == "MiB" ? 1 << 20 : 1 << 10);
    CHECK(bytes <= double(o.memory_budget));
    ++ranks;
  }
  REQUIRE(ranks == 4);
}

TEST_CASE("train: the out-of-memory context counts what the rank holds from its tensors", "[train][memory]") {
  TrainOptions o = small_sort_options();
  o.stages = 0;
  Trainer trainer(o);
  const MemoryContextScope registered = register_memory_context(trainer, nullptr);
  // The model's own count, f32: 4 bytes each; AdamW keeps two f32 moments per parameter.
  const int64_t n = trainer.model().parameter_count();
  const std::string weights = format_bytes(double(4 * n));
  const std::string advice =
      ".\nTo fit, try: more pipeline stages (--stages), --recompute, fewer micro-batches in flight (--schedule 1f1b "
      "rather than gpipe), a smaller --batch, or a higher --memory-limit.";
  REQUIRE(memory_context() == "this process (the whole model on cpu): parameters " + weights + " (" + with_commas(n) +
                                  "), gradients 0 B, optimizer state 0 B" + advice);
  // After a step: the moments exist; the gradients were dropped with the update (a failure inside
  // the backward would count them).
  trainer.train_step();
  REQUIRE(memory_context() == "this process (the whole model on cpu): parameters " + weights + " (" + with_commas(n) +
                                  "), gradients 0 B, optimizer state " + format_bytes(double(8 * n)) + advice);
}

TEST_CASE("train: the memory model counts the tied token table once on a rank holding both ends (zb-v, dualpipev)",
          "[train][memory]") {
  // Each rank's model of its stages' parameters and optimizer state against what its modules hold:
  // on a V-shaped layout rank 0 holds the embedding's stage and the head's, which share one table.
  for (const char* schedule : {"zb-v", "dualpipev", "1f1b"}) {
    TrainOptions o = small_sort_options();
    o.microbatches = 4;
    o.stages = 2;
    o.schedule = pipeline::parse_schedule_kind(schedule);
    const int P = 2;
    auto world = comm::local_group(P);
    std::vector<int64_t> held(static_cast<size_t>(P), 0), optimizer(static_cast<size_t>(P), 0);
    pipeline::MemoryModel model;
    pipeline::Layout layout;
    REQUIRE(test::all_ok(test::run_ranks(world, [&](comm::Communicator& comm) {
      auto groups = pipeline::PipelineGroups::split(comm, P);
      Trainer trainer(o, groups.get());
      trainer.set_trace(true);
      trainer.train_step();
      for (const Tensor& p : trainer.model().parameters()) {
        held[size_t(comm.rank())] += allocated_bytes(Device::cpu(), p.storage().nbytes());
        optimizer[size_t(comm.rank())] += 2 * allocated_bytes(Device::cpu(), size_t(p.numel()) * 4);
      }
      if (comm.rank() == 0) {
        model = memory_model(trainer, trainer.last_trace());
        layout = trainer.schedule().layout;
      }
    })));
    INFO(schedule);
    for (int r = 0; r < P; ++r) {
      int64_t parameters = 0, moments = 0;
      for (int s = 0; s < int(model.stages.size()); ++s)
        if (layout.rank_of(s) == r) {
          parameters += model.stages[size_t(s)].parameters;
          moments += model.stages[size_t(s)].optimizer;
        }
      INFO("rank " << r);
      CHECK(parameters == held[size_t(r)]);
      CHECK(moments == optimizer[size_t(r)]);
    }
  }
}
