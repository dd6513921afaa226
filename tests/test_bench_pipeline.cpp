// `brigade bench pipeline` (tools/bench_pipeline/): the trace arithmetic on hand-made timelines,
// the flags, and the command itself run with --quick on the CPU, its table and JSON checked against
// what the schedules' theory says. No timing assertions: only that times are positive.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <unistd.h>

#include "bench_pipeline/analysis.h"
#include "bench_pipeline/command.h"
#include "bench_pipeline/options.h"
#include "core/json.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_csv.h"
#include "temp_dir.h"

using namespace brigade;
using namespace brigade::bench_pipeline;
using pipeline::Action;
using pipeline::ActionKind;
using pipeline::Trace;
using Catch::Contains;

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Run {
  int status;
  std::string out, err;
};

Run run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = bench_pipeline_command(args, out, err);
  return {status, out.str(), err.str()};
}

using test::TempDir;

Trace two_rank_trace() {
  // rank 0: F0 [0, 2), exchange (sendA0 + recvG0, one span) [2, 6), B0 [6, 9)
  // rank 1: exchange (recvA0) [0, 3), F0 [3, 4), B0 [4, 5), exchange (sendG0) [5, 5.5)
  Trace t;
  t.ranks = 2;
  t.events = {
      {0, pipeline::F(0), 0, 2},
      {0, {ActionKind::send_activation, 0, 0}, 2, 6},
      {0, {ActionKind::recv_gradient, 0, 0}, 2, 6},
      {0, pipeline::B(0), 6, 9},
      {1, {ActionKind::recv_activation, 0, 0}, 0, 3},
      {1, pipeline::F(0), 3, 4},
      {1, pipeline::B(0), 4, 5},
      {1, {ActionKind::send_gradient, 0, 0}, 5, 5.5},
  };
  return t;
}

}  // namespace

TEST_CASE("bench pipeline: interval unions and overlaps, by hand", "[bench][pipeline]") {
  CHECK(union_length({}) == 0);
  CHECK(union_length({{0, 1}, {0.5, 2}, {3, 4}}) == 3);
  CHECK(union_length({{3, 4}, {0, 1}, {1, 2}}) == 3);  // unsorted, touching
  CHECK(union_length({{1, 1}, {2, 1}}) == 0);          // empty and reversed count nothing
  CHECK(overlap_length({{0, 4}}, {{1, 2}, {3, 5}}) == 2);
  CHECK(overlap_length({{0, 1}, {2, 3}}, {{1, 2}}) == 0);
  CHECK(overlap_length({{0, 10}}, {{1, 3}, {2, 4}}) == 3);  // the second list overlaps itself
}

TEST_CASE("bench pipeline: a rank's time in exchanges and the part hidden behind others' compute",
          "[bench][pipeline]") {
  const std::vector<RankTime> t = rank_times(two_rank_trace());
  REQUIRE(t.size() == 2);
  // Rank 0 computes 2 + 3; its one exchange spans [2, 6) (two messages, counted once); rank 1
  // computed in [3, 5) of it.
  CHECK(t[0].compute == 5);
  CHECK(t[0].exchange == 4);
  CHECK(t[0].hidden == 2);
  // Rank 1: exchanges [0, 3) and [5, 5.5); rank 0 computed in [0, 2) and [6, 9).
  CHECK(t[1].compute == 2);
  CHECK(t[1].exchange == 3.5);
  CHECK(t[1].hidden == 2);
}

TEST_CASE("bench pipeline: mean action costs feed the simulator", "[bench][pipeline]") {
  const ActionCosts c = mean_action_costs({two_rank_trace()});
  CHECK(c.forwards == 2);
  CHECK(c.forward == 1.5);   // (2 + 1) / 2
  CHECK(c.backwards == 2);
  CHECK(c.backward == 2);    // (3 + 1) / 2
  CHECK(c.backward_inputs == 0);
  const pipeline::Costs unsplit = simulator_costs(c);
  CHECK(unsplit.forward == 1.5);
  CHECK(unsplit.full_backward() == 2);  // the simulator charges B = I + W

  Trace split;
  split.ranks = 1;
  split.events = {{0, pipeline::I(0), 0, 1}, {0, pipeline::I(1), 1, 4}, {0, pipeline::W(0), 4, 5}};
  const pipeline::Costs costs = simulator_costs(mean_action_costs({split}));
  CHECK(costs.backward == 2);
  CHECK(costs.weight == 1);
}

TEST_CASE("bench pipeline: flags, defaults and their errors", "[bench][pipeline]") {
  SECTION("--quick on the CPU resolves to a small model, every schedule, whole micro-batches") {
    ParsedBenchArgs p = parse_bench_args({"--quick", "--device", "cpu", "--microbatches", "6"});
    p.options.resolve();
    const BenchOptions& o = p.options;
    CHECK(o.device == Device::cpu());
    CHECK(o.schedules == pipeline::all_schedule_kinds());  // naive, gpipe, 1f1b, interleaved, zb-h1, zb-v, dualpipev
    CHECK(o.batch % 6 == 0);
    CHECK(o.steps == 3);
    CHECK(o.warmup == 1);
    CHECK(o.embd % o.heads == 0);
    CHECK(o.precision == DType::f32);  // the CPU's default (bf16 on a GPU)
  }
  SECTION("explicit values win") {
    ParsedBenchArgs p = parse_bench_args({"--quick", "--device=cpu", "--steps", "7", "--warmup", "0", "--batch", "12",
                                          "--microbatches", "4", "--schedules", "zb-h1,1f1b"});
    p.options.resolve();
    CHECK(p.options.steps == 7);
    CHECK(p.options.warmup == 0);
    CHECK(p.options.batch == 12);
    CHECK(p.options.schedules == std::vector<pipeline::ScheduleKind>{pipeline::ScheduleKind::zb_h1,
                                                                      pipeline::ScheduleKind::one_f_one_b});
    ParsedBenchArgs mixed = parse_bench_args({"--quick", "--device", "cpu", "--precision", "bf16"});
    mixed.options.resolve();
    CHECK(mixed.options.precision == DType::bf16);
  }
  SECTION("bad values name the flag") {
    CHECK_THROWS_WITH(parse_bench_args({"--schedules", "1f1b,2f2b"}), Contains("--schedules") && Contains("2f2b"));
    CHECK_THROWS_WITH(parse_bench_args({"--schedules", "gpipe,gpipe"}), Contains("twice"));
    CHECK_THROWS_WITH(parse_bench_args({"--chunks", "1"}), Contains("--chunks"));
    CHECK_THROWS_WITH(parse_bench_args({"--device", "tpu"}), Contains("--device"));
    CHECK_THROWS_WITH(parse_bench_args({"--precision", "fp8"}), Contains("--precision") && Contains("fp8"));
    ParsedBenchArgs uneven = parse_bench_args({"--device", "cpu", "--batch", "10", "--microbatches", "4"});
    CHECK_THROWS_WITH(uneven.options.resolve(), Contains("--batch 10") && Contains("--microbatches 4"));
    ParsedBenchArgs heads = parse_bench_args({"--device", "cpu", "--embd", "30", "--heads", "4"});
    CHECK_THROWS_WITH(heads.options.resolve(), Contains("--embd 30") && Contains("--heads 4"));
    CHECK_THROWS_WITH(parse_bench_args({"--transport", "mpi"}), Contains("--transport") && Contains("mpi"));
    CHECK_THROWS_WITH(parse_bench_args({"--replicas", "0"}), Contains("--replicas"));
    ParsedBenchArgs nccl_cpu = parse_bench_args({"--device", "cpu", "--transport", "nccl"});
    CHECK_THROWS_WITH(nccl_cpu.options.resolve(), Contains("--transport nccl needs a GPU"));
  }
  SECTION("the command answers a bad flag with status 2 and the usage, --help with 0") {
    const Run bad = run({"--stages", "zero"});
    CHECK(bad.status == 2);
    CHECK_THAT(bad.err, Contains("--stages") && Contains("usage: brigade bench pipeline"));
    // An output that cannot be written is found before any measuring.
    const Run nowhere = run({"--quick", "--device", "cpu", "--json", "/nonexistent-brigade-dir/x.json"});
    CHECK(nowhere.status == 1);
    CHECK_THAT(nowhere.err, Contains("--json") && Contains("does not exist") && !Contains("unpipelined"));
    const Run help = run({"--help"});
    CHECK(help.status == 0);
    CHECK_THAT(help.out, Contains("--trace-dir DIR"));
  }
}

TEST_CASE("bench pipeline: --quick on the CPU, every schedule against theory", "[bench][pipeline]") {
  TempDir dir;
  const std::filesystem::path json_path = dir.path / "pipeline.json";
  const std::filesystem::path traces = dir.path / "traces";
  const Run r = run({"--quick", "--device", "cpu", "--json", json_path.string(), "--trace-dir", traces.string()});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);

  const std::vector<std::string> names = {"naive", "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipev"};
  for (const std::string& name : names) CHECK_THAT(r.out, Contains("\n" + name + " "));
  CHECK_THAT(r.out, Contains("exposed comm") && Contains("unpipelined"));

  // The file is complete (written whole, then renamed: no temporary left next to it) and valid JSON.
  const std::string text = read_file(json_path);
  REQUIRE(text.size() > 2);
  CHECK(text.substr(text.size() - 2) == "}\n");
  size_t files_in_dir = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) files_in_dir += entry.is_regular_file();
  CHECK(files_in_dir == 1);
  Json doc;
  REQUIRE_NOTHROW(doc = parse_json(text));

  const int P = int(doc["stages"].as_number());
  const int M = int(doc["microbatches"].as_number());
  const int V = int(doc["chunks"].as_number());
  REQUIRE(P == 4);  // the quick run keeps the default pipeline shape
  REQUIRE(M == 8);
  REQUIRE(V == 2);
  CHECK(doc["device"]["type"].string == "cpu");
  CHECK(doc["model"]["precision"].string == "f32");
  CHECK_THAT(r.out, Contains("parameters, f32\n"));
  CHECK(!doc["device"]["name"].string.empty());
  CHECK(doc["device"]["cpu_threads"].as_number() >= 1);
  CHECK(!doc["date"].string.empty());
  CHECK(!doc["git_commit"].string.empty());

  const Json& base = doc["unpipelined"];
  REQUIRE(base["step_seconds"].items.size() == 3);
  for (const Json& s : base["step_seconds"].items) CHECK(s.as_number() > 0);
  const double reference_loss = base["loss"].as_number();

  // The textbook bubbles with unit costs (F = I = W = 1, B = 2), from docs/pipeline.md.
  const std::map<std::string, double> textbook = {
      {"naive", (P - 1.0) / P},
      {"gpipe", (P - 1.0) / (M + P - 1)},
      {"1f1b", (P - 1.0) / (M + P - 1)},
      {"interleaved", (P - 1.0) / (V * M + P - 1)},
      {"zb-h1", (P - 1.0) / (3 * M + P - 1)},
      {"zb-v", (P - 1.0) / (6 * M + P - 1)},  // M = 2P: the pipe is full
  };
  const Json& schedules = doc["schedules"];
  REQUIRE(schedules.items.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const Json& s = schedules[i];
    const std::string& name = names[i];
    INFO("schedule " << name);
    REQUIRE(s["name"].string == name);
    REQUIRE(s["skipped"].kind == Json::Kind::null);
    REQUIRE(s["step_seconds"].items.size() == 3);
    for (const Json& t : s["step_seconds"].items) CHECK(t.as_number() > 0);
    REQUIRE(s["bubbles"].items.size() == 3);
    for (const Json& b : s["bubbles"].items) {
      CHECK(b.as_number() >= 0);
      CHECK(b.as_number() < 1);
    }
    CHECK(s["bubble"].as_number() >= 0);
    CHECK(s["bubble"].as_number() < 1);
    CHECK(s["predicted"]["bubble"].as_number() >= 0);
    CHECK(s["predicted"]["bubble"].as_number() < 1);
    if (textbook.count(name))  // dualpipev has none: its pairs' overlap is not modelled (docs/pipeline.md)
      CHECK(s["unit_costs"]["bubble"].as_number() == Approx(textbook.at(name)).margin(1e-12));
    CHECK(s["tokens_per_second"].as_number() > 0);
    CHECK(s["exposed_comm"].as_number() >= 0);
    CHECK(s["exposed_comm"].as_number() <= 1);
    // The pipeline computed the same loss as one device (bitwise per micro-batch on the CPU; the
    // means are summed in a different order).
    CHECK(s["loss"].as_number() == Approx(reference_loss).epsilon(1e-12));

    // Every compute action of every timed step was traced: F and a backward per micro-batch and stage.
    const double per_step = double(M) * P * s["chunks"].as_number();
    const Json& counts = s["action_counts"];
    CHECK(counts["F"].as_number() == 3 * per_step);
    if (name == "dualpipev") {  // whole backwards, and I + W for some in the drain
      CHECK(counts["B"].as_number() + counts["I"].as_number() == 3 * per_step);
      CHECK(counts["W"].as_number() == counts["I"].as_number());
    } else if (name == "zb-h1" || name == "zb-v") {
      CHECK(counts["I"].as_number() == 3 * per_step);
      CHECK(counts["W"].as_number() == 3 * per_step);
      CHECK(counts["B"].as_number() == 0);
    } else {
      CHECK(counts["B"].as_number() == 3 * per_step);
    }

    const Json& ranks = s["per_rank"];
    REQUIRE(ranks.items.size() == size_t(P));
    for (int q = 0; q < P; ++q) {
      const Json& rank = ranks[size_t(q)];
      CHECK(rank["compute"].as_number() > 0);
      CHECK(rank["compute"].as_number() + rank["exposed_comm"].as_number() <= 1 + 1e-9);
      // Stashed activations are the schedule's, whatever the timing (docs/pipeline.md).
      const int peak = int(rank["peak_stashed"].as_number());
      if (name == "gpipe") CHECK(peak == M);
      if (name == "1f1b") CHECK(peak == P - q);
      if (name == "naive") CHECK(peak == 1);
      if (name == "zb-v") CHECK(peak == 2 * P);  // M = 2P: 2P half-size chunk stashes on every rank
    }
    // Both trace files of the schedule exist.
    CHECK(std::filesystem::exists(traces / (name + ".trace.json")));
    CHECK(std::filesystem::exists(traces / (name + ".svg")));
  }

  // 1F1B with unit costs, exactly: every time is a whole number of units, so the simulator's
  // makespan is (M + P - 1)(F + B) and each rank is busy M(F + B), with no rounding anywhere; the
  // bubble is then 1 - 3M / (3(M + P - 1)) = (P - 1)/(M + P - 1).
  const Json& one_f_one_b = schedules[2];
  CHECK(one_f_one_b["unit_costs"]["makespan"].as_number() == 3.0 * (M + P - 1));
  for (const Json& busy : one_f_one_b["unit_costs"]["busy_per_rank"].items) CHECK(busy.as_number() == 3.0 * M);
  CHECK(one_f_one_b["unit_costs"]["bubble"].as_number() == (P - 1.0) / (M + P - 1));

  // The Chrome trace is JSON too.
  REQUIRE_NOTHROW(parse_json(read_file(traces / "1f1b.trace.json")));
}

TEST_CASE("bench pipeline: interleaved is skipped, with a note, when M is not a multiple of P", "[bench][pipeline]") {
  TempDir dir;
  const std::filesystem::path json_path = dir.path / "skip.json";
  const Run r = run({"--quick", "--device", "cpu", "--stages", "3", "--microbatches", "4", "--schedules",
                     "interleaved,gpipe", "--steps", "1", "--warmup", "0", "--json", json_path.string()});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("interleaved: skipped") && Contains("M=4, P=3"));
  CHECK_THAT(r.out, Contains("\ngpipe "));
  const Json doc = parse_json(read_file(json_path));
  CHECK_THAT(doc["schedules"][0]["skipped"].string, Contains("multiple of P"));
  CHECK(doc["schedules"][1]["skipped"].kind == Json::Kind::null);
  CHECK(doc["schedules"][1]["unit_costs"]["bubble"].as_number() == Approx(2.0 / 6).margin(1e-12));
}

TEST_CASE("bench pipeline: --replicas times data parallelism, reductions overlapped and at the end",
          "[bench][pipeline][dp]") {
  // On the local transport a collective blocks its thread, so nothing starts early: both runs reduce
  // at the end, and the report says so (0 of N). Over NCCL the GPU tests see reductions start early.
  TempDir dir;
  const std::filesystem::path json_path = dir.path / "dp.json";
  const Run r = run({"--quick", "--device", "cpu", "--stages", "2", "--microbatches", "2", "--replicas", "2",
                     "--schedules", "1f1b", "--steps", "1", "--warmup", "0", "--json", json_path.string()});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("data parallelism: 2 replicas x P=2 over local"));
  const Json doc = parse_json(read_file(json_path));
  CHECK(doc["replicas"].as_number() == 2);
  const Json& dp = doc["schedules"][0]["data_parallel"];
  // 4 ranks, each with one bucket for its chunk (25 MiB holds it) and one for its copy of the tied
  // embedding / head, averaged after the pipeline sums the copies.
  CHECK(dp["reductions"].as_number() == 8);
  CHECK(dp["started_during_step"].as_number() == 0);
  CHECK(dp["at_end"]["median"].as_number() > 0);
  CHECK(dp["overlapped"]["median"].as_number() > 0);
  CHECK(std::isfinite(dp["saved"].as_number()));
  // Without replicas there is nothing to report.
  const Run plain = run({"--quick", "--device", "cpu", "--stages", "2", "--microbatches", "2", "--schedules", "1f1b",
                         "--steps", "1", "--warmup", "0", "--json", json_path.string()});
  REQUIRE(plain.status == 0);
  CHECK(parse_json(read_file(json_path))["schedules"][0]["data_parallel"].kind == Json::Kind::null);
  CHECK_THAT(plain.out, !Contains("data parallelism:"));
}

TEST_CASE("bench pipeline: --schedule-file times a schedule from a file beside the built-in ones", "[bench][pipeline]") {
  TempDir dir;
  const std::filesystem::path csv = dir.path / "my-zbv.csv";
  pipeline::write_schedule_csv(csv.string(), pipeline::make_schedule(pipeline::ScheduleKind::zb_v, 2, 4));
  const std::filesystem::path json_path = dir.path / "file.json";
  const Run r = run({"--quick", "--device", "cpu", "--stages", "2", "--microbatches", "4", "--schedules", "zb-v",
                     "--schedule-file", csv.string(), "--steps", "1", "--warmup", "0", "--json", json_path.string()});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("\nmy-zbv.csv "));
  const Json doc = parse_json(read_file(json_path));
  const Json& built_in = doc["schedules"][0];
  const Json& from_file = doc["schedules"][1];
  CHECK(from_file["name"].string == "my-zbv.csv");
  CHECK(from_file["chunks"].as_number() == 2);
  // The same schedule, read back: the same textbook bubble, and the same loss to the bit (a pipeline
  // computes what one device does, whatever its order).
  CHECK(from_file["unit_costs"]["bubble"].as_number() == built_in["unit_costs"]["bubble"].as_number());
  CHECK(from_file["loss"].as_number() == built_in["loss"].as_number());

  // A file for another pipeline shape is refused before anything is measured, naming both.
  const Run wrong = run({"--quick", "--device", "cpu", "--stages", "3", "--microbatches", "4", "--schedule-file",
                         csv.string()});
  CHECK(wrong.status != 0);
  CHECK_THAT(wrong.err, Contains("has P=2, M=4, but this run has --stages 3 and --microbatches 4"));
  CHECK_THAT(wrong.out + wrong.err, !Contains("unpipelined ("));
}
