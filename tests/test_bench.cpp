// The benchmark harness's CPU-side pieces: statistics, the table and the JSON it writes, the
// environment strings, `brigade bench kernels` flag parsing, its no-GPU behaviour, and a whole quick
// run of its CPU mode, read back from its JSON.
#include <cstdlib>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench/cpu_info.h"
#include "bench/environment.h"
#include "bench_kernels/command.h"
#include "bench_step/command.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "core/device.h"
#include "core/error.h"
#include "core/json.h"
#include "core/read_file.h"
#include "temp_dir.h"

using namespace brigade::bench;

TEST_CASE("summarize: median, min, max and mean of timings") {
  SECTION("odd count: the middle value") {
    const Summary s = summarize({5.0, 1.0, 3.0});
    CHECK(s.median == 3.0);
    CHECK(s.min == 1.0);
    CHECK(s.max == 5.0);
    CHECK(s.mean == 3.0);
    CHECK(s.count == 3);
  }
  SECTION("even count: the mean of the two middle values") {
    CHECK(summarize({4.0, 1.0, 3.0, 2.0}).median == 2.5);
  }
  SECTION("one outlier moves the mean, not the median") {
    const Summary s = summarize({1.0, 1.0, 1.0, 1.0, 100.0});
    CHECK(s.median == 1.0);
    CHECK(s.mean == Approx(20.8));
  }
  SECTION("a single sample") {
    const Summary s = summarize({0.25});
    CHECK(s.median == 0.25);
    CHECK(s.min == 0.25);
    CHECK(s.max == 0.25);
  }
  SECTION("no samples is an error") {
    REQUIRE_THROWS_WITH(summarize({}), Catch::Contains("no samples"));
  }
}

TEST_CASE("quantile interpolates between neighbours") {
  const std::vector<double> v = {10, 20, 30, 40, 50};
  CHECK(quantile(v, 0.0) == 10);
  CHECK(quantile(v, 1.0) == 50);
  CHECK(quantile(v, 0.5) == 30);
  CHECK(quantile(v, 0.1) == Approx(14));
  CHECK(quantile({3, 1, 2}, 0.25) == Approx(1.5));  // unsorted input
  REQUIRE_THROWS_WITH(quantile(v, 1.5), Catch::Contains("q must be in [0, 1]"));
}

TEST_CASE("format_number gives significant digits without exponents for everyday values") {
  CHECK(format_number(0) == "0");
  CHECK(format_number(1.23456) == "1.23");
  CHECK(format_number(12.3456) == "12.3");
  CHECK(format_number(1234.56) == "1235");
  CHECK(format_number(0.0123456) == "0.0123");
  CHECK(format_number(-2.5, 2) == "-2.5");
  CHECK(format_number(3456.7, 4) == "3457");
  CHECK(format_number(1e-7) == "1.00e-07");
  CHECK(format_number(std::nan("")) == "nan");
}

TEST_CASE("format_table aligns columns and underlines the header") {
  const std::string table = format_table({{"kernel"}, {"ms", true}}, {{"add", "0.5"}, {"softmax", "12.25"}});
  CHECK(table ==
        "kernel      ms\n"
        "-------  -----\n"
        "add        0.5\n"
        "softmax  12.25\n");
  REQUIRE_THROWS_WITH(format_table({{"a"}, {"b"}}, {{"only one"}}), Catch::Contains("row 0 has 1 cells for 2 columns"));
}

TEST_CASE("json_string escapes what JSON requires") {
  CHECK(json_string("plain") == "\"plain\"");
  CHECK(json_string("say \"hi\"\\") == "\"say \\\"hi\\\"\\\\\"");
  CHECK(json_string("a\nb\tc") == "\"a\\nb\\tc\"");
  CHECK(json_string(std::string("\x01", 1)) == "\"\\u0001\"");
}

namespace {

Report sample_report() {
  Report r;
  r.env.gpu_name = "NVIDIA H200";
  r.env.compute_capability = "9.0";
  r.env.sm_count = 132;
  r.env.memory_gib = 139.8;
  r.env.l2_mib = 60;
  r.env.driver_version = "570.86.15";
  r.env.driver_cuda_version = "12.8";
  r.env.runtime_version = "13.0";
  r.env.date = "2026-11-21T11:30:00Z";
  r.env.git_commit = "abc123def456-dirty";
  r.ceilings.push_back({"device-to-device copy", 3950.7, "GB/s"});
  Measurement m;
  m.group = "elementwise";
  m.name = "add";
  m.shape = "67108864";
  m.dtype = "bf16";
  m.time_ms = summarize({0.2, 0.21, 0.19});
  m.achieved = 2013.3;
  m.unit = "GB/s";
  m.baseline = "copy bandwidth";
  m.percent = 50.96;
  r.results.push_back(m);
  Measurement no_baseline = m;
  no_baseline.name = "conv2d direct forward";
  no_baseline.baseline = "";
  no_baseline.percent = -1;
  r.results.push_back(no_baseline);
  Measurement failed;
  failed.group = "gemm";
  failed.name = "matmul tiled";
  failed.error = "matmul (tiled): no kernel";
  r.results.push_back(failed);
  return r;
}

}  // namespace

TEST_CASE("report_json holds the environment, the ceilings and every measurement") {
  const std::string json = report_json(sample_report());
  for (const char* expected :
       {"\"gpu\": {\"name\": \"NVIDIA H200\"", "\"driver_version\": \"570.86.15\"", "\"driver_cuda_version\": \"12.8\"",
        "\"cuda_runtime_version\": \"13.0\"", "\"date\": \"2026-11-21T11:30:00Z\"",
        "\"git_commit\": \"abc123def456-dirty\"", "{\"name\": \"device-to-device copy\", \"value\": 3950.7, \"unit\": \"GB/s\"}",
        "\"name\": \"add\"", "\"median_ms\": 0.2,", "\"repeats\": 3", "\"percent_of_baseline\": 50.96",
        "\"percent_of_baseline\": null", "\"error\": \"matmul (tiled): no kernel\""}) {
    INFO(expected);
    CHECK(json.find(expected) != std::string::npos);
  }
  // Balanced braces and brackets, and no trailing comma before a closing one.
  int depth = 0;
  for (char c : json) depth += (c == '{' || c == '[') - (c == '}' || c == ']');
  CHECK(depth == 0);
  CHECK(json.find(",\n  ]") == std::string::npos);
  CHECK(json.find(",]") == std::string::npos);
  // An empty report is still valid JSON.
  const std::string empty = report_json(Report{});
  CHECK(empty.find("\"ceilings\": [],") != std::string::npos);
  CHECK(empty.find("\"results\": []") != std::string::npos);
}

TEST_CASE("report_text shows the machine, the ceilings and a row per measurement") {
  const std::string text = report_text(sample_report());
  CHECK(text.find("NVIDIA H200 (sm_9.0, 132 SMs") != std::string::npos);
  CHECK(text.find("570.86.15 (CUDA 12.8), runtime CUDA 13.0") != std::string::npos);
  CHECK(text.find("abc123def456-dirty") != std::string::npos);
  CHECK(text.find("3951") != std::string::npos);  // the ceiling, 4 significant digits
  CHECK(text.find("2013 GB/s") != std::string::npos);
  CHECK(text.find("51.0% of copy bandwidth") != std::string::npos);
  CHECK(text.find("FAILED: matmul (tiled): no kernel") != std::string::npos);
}

TEST_CASE("report_text and report_json describe the CPU in a CPU run") {
  Report r = sample_report();
  r.env = {};
  r.env.device = "cpu";
  r.env.cpu_name = "AMD EPYC 7B13";
  r.env.cpu_logical_cores = 2;
  r.env.cpu_threads = 2;
  r.env.cpu_llc_mib = 32;
  r.ceilings = {{"copy bandwidth: memcpy of 256 MiB on 2 threads", 12.5, "GB/s"},
                {"FMA peak: AVX2+FMA on 2 threads", 190.25, "GFLOP/s"}};
  const std::string text = report_text(r);
  CHECK(text.find("brigade bench kernels on the CPU\n") != std::string::npos);
  CHECK(text.find("CPU      AMD EPYC 7B13 (2 logical cores, brigade uses 2 threads, last-level cache 32.0 MiB)") !=
        std::string::npos);
  CHECK(text.find("Ceilings measured on this CPU") != std::string::npos);
  CHECK(text.find("GPU ") == std::string::npos);  // no empty GPU line
  CHECK(text.find("driver") == std::string::npos);
  const std::string json = report_json(r);
  CHECK(json.find("\"device\": \"cpu\"") != std::string::npos);
  CHECK(json.find("\"cpu\": {\"name\": \"AMD EPYC 7B13\", \"logical_cores\": 2, \"threads\": 2, \"llc_mib\": 32}") !=
        std::string::npos);
  CHECK(json.find("\"gpu\": {\"name\": \"\"") != std::string::npos);
  CHECK(brigade::parse_json(json)["ceilings"][1]["unit"].string == "GFLOP/s");
}

TEST_CASE("describing the CPU: /proc/cpuinfo and sysfs texts") {
  CHECK(cpu_model_name("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n") ==
        "AMD EPYC 7B13");
  CHECK(cpu_model_name("Processor\t: ARMv7 Processor rev 4 (v7l)\n") == "ARMv7 Processor rev 4 (v7l)");
  CHECK(cpu_model_name("processor\t: 0\nBogoMIPS\t: 50.00\n") == "");
  CHECK(parse_cache_size("32768K") == (size_t(32) << 20));
  CHECK(parse_cache_size("1M") == (size_t(1) << 20));
  CHECK(parse_cache_size("512") == 512);
  CHECK(parse_cache_size("") == 0);
  CHECK(parse_cache_size("big") == 0);
  CHECK(parse_cache_size("12X") == 0);
  CHECK(count_cpu_list("0-1") == 2);
  CHECK(count_cpu_list("0-7,64-71") == 16);
  CHECK(count_cpu_list("3") == 1);
  CHECK(count_cpu_list("5-2") == 0);
  CHECK(count_cpu_list("a") == 0);
  const CpuInfo cpu = describe_cpu();
  CHECK(!cpu.name.empty());
  CHECK(cpu.logical_cores >= 1);
  CHECK(cpu.llc_bytes >= (size_t(1) << 20));
  const brigade::bench::Environment e = describe_environment(brigade::Device::cpu());
  CHECK(e.device == "cpu");
  CHECK(e.cpu_name == cpu.name);
  CHECK(e.cpu_threads >= 1);
  CHECK(e.gpu_name.empty());
}

TEST_CASE("environment strings") {
  CHECK(cuda_version_text(12080) == "12.8");
  CHECK(cuda_version_text(13000) == "13.0");
  CHECK(cuda_version_text(0) == "unknown");
  CHECK(nvidia_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Wed Jan 8 2025\nGCC ...") ==
        "570.86.15");
  // The open kernel module's wording, as an H200 machine's /proc/driver/nvidia/version has it.
  CHECK(nvidia_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                              "(dvs-builder@U22)  Thu 2025\nGCC version: gcc 12") == "580.159.04");
  CHECK(nvidia_driver_version("NVRM version: NVIDIA UNIX Kernel Module for x86_64\nGCC version: 12.2") == "");
  CHECK(nvidia_driver_version("nothing here") == "");
  const std::string now = utc_timestamp();
  CHECK(now.size() == 20);
  CHECK(now[10] == 'T');
  CHECK(now.back() == 'Z');
  const brigade::bench::Environment e = describe_environment(brigade::Device::cpu());
  CHECK(!e.git_commit.empty());
  CHECK(!e.date.empty());
  // A build without .git (a lent GPU machine) is told its commit through the environment.
  ::setenv("BRIGADE_GIT_COMMIT", "0123456789ab-dirty", 1);
  CHECK(describe_environment(brigade::Device::cpu()).git_commit == "0123456789ab-dirty");
  ::unsetenv("BRIGADE_GIT_COMMIT");
  CHECK(describe_environment(brigade::Device::cpu()).git_commit == e.git_commit);
}

TEST_CASE("bench kernels: flags") {
  // The message a bad command line gets (tools/cli/flags.h's wording, as every command's).
  auto error_of = [](const std::vector<std::string>& args) -> std::string {
    try {
      parse_kernels_args(args);
    } catch (const brigade::cli::UsageError& e) {
      return e.what();
    }
    return "";
  };
  SECTION("defaults") {
    const auto o = parse_kernels_args({}).options;
    CHECK(!o.quick);
    CHECK(o.json_path.empty());
    CHECK(!o.device);  // chosen at run time: cuda where a GPU is present, else cpu
  }
  SECTION("--device cpu|cuda") {
    CHECK(parse_kernels_args({"--device", "cpu"}).options.device == brigade::Device::cpu());
    CHECK(parse_kernels_args({"--device=cuda"}).options.device == brigade::Device::cuda(0));
    CHECK(error_of({"--device", "gpu"}) == "--device: expected cpu or cuda, got 'gpu'");
    CHECK(error_of({"--device", "auto"}) == "--device: expected cpu or cuda, got 'auto'");
    CHECK(error_of({"--device"}) == "--device: missing value (DEV)");
  }
  SECTION("--json FILE, --json=FILE and --quick") {
    const auto o = parse_kernels_args({"--quick", "--json", "out.json"}).options;
    CHECK(o.quick);
    CHECK(o.json_path == "out.json");
    CHECK(parse_kernels_args({"--json=x.json"}).options.json_path == "x.json");
  }
  SECTION("errors") {
    CHECK(error_of({"--json"}) == "--json: missing value (FILE)");
    CHECK(error_of({"--json", "--quick"}) == "--json: expected a file name, got '--quick'");
    CHECK(error_of({"--fast"}) == "unknown flag '--fast'");
    CHECK(error_of({"--quick=yes"}) == "--quick: takes no value");
  }
  SECTION("a bad flag exits 2 with the usage") {
    std::ostringstream out, err;
    CHECK(kernels_command({"--nope"}, out, err) == 2);
    CHECK(err.str().find("brigade bench kernels: unknown flag '--nope'") != std::string::npos);
    CHECK(err.str().find("usage: brigade bench kernels") != std::string::npos);
  }
  SECTION("--help exits 0") {
    std::ostringstream out, err;
    CHECK(kernels_command({"--help"}, out, err) == 0);
    CHECK(out.str().find("--quick") != std::string::npos);
  }
}

TEST_CASE("bench kernels --device cuda without a usable GPU says so and exits 0") {
  // On a machine with a GPU this would run the real benchmarks: that belongs to `brigade bench`, not
  // to a unit test. (The emulator build refuses --device cuda whatever cuda_device_count says.)
#if !BRIGADE_CUDA_EMULATOR
  if (brigade::cuda_device_count() > 0) return;
#endif
  std::ostringstream out, err;
  CHECK(kernels_command({"--device", "cuda", "--quick", "--json", "/nonexistent/dir/never-written.json"}, out, err) ==
        0);
  CHECK(out.str().find("--device cpu measures the CPU") != std::string::npos);
}

namespace {

// The ceiling a row's baseline names: in a CPU run, the baseline is the start of a ceiling's name
// ("FMA peak" for "FMA peak: AVX2+FMA on 2 threads"). Null when there is none.
const brigade::Json* ceiling_named(const brigade::Json& ceilings, const std::string& baseline) {
  for (const brigade::Json& c : ceilings.items) {
    const std::string& name = c["name"].string;
    if (name == baseline || name.rfind(baseline + ":", 0) == 0) return &c;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("bench kernels --quick on the CPU: ceilings, every group, and percentages that add up") {
  const test::TempDir dir;
  const std::string path = dir.file("report.json");
  std::ostringstream out, err;
  REQUIRE(kernels_command({"--device", "cpu", "--quick", "--json", path}, out, err) == 0);
  INFO(out.str() + err.str());
  CHECK(out.str().find("brigade bench kernels on the CPU (quick)") != std::string::npos);
  const brigade::Json report = brigade::parse_json(brigade::read_file(path, "test"));

  CHECK(report["device"].string == "cpu");
  CHECK(report["quick"].boolean);
  CHECK(!report["cpu"]["name"].string.empty());
  CHECK(report["cpu"]["threads"].as_number() >= 1);
  CHECK(report["gpu"]["name"].string.empty());

  // The ceilings: all positive; the copy bandwidth, the FMA peak, and brigade's GEMM for reference.
  const brigade::Json& ceilings = report["ceilings"];
  REQUIRE(ceilings.items.size() == 3);
  for (const brigade::Json& c : ceilings.items) {
    INFO(c["name"].string);
    CHECK(c["value"].as_number() > 0);
  }
  const brigade::Json* copy = ceiling_named(ceilings, "copy bandwidth");
  const brigade::Json* fma = ceiling_named(ceilings, "FMA peak");
  REQUIRE(copy != nullptr);
  REQUIRE(fma != nullptr);
  CHECK((*copy)["unit"].string == "GB/s");
  CHECK((*fma)["unit"].string == "GFLOP/s");
  const double fma_peak = (*fma)["value"].as_number();
  CHECK(ceilings[2]["name"].string.rfind("brigade f32 GEMM", 0) == 0);
  CHECK(ceilings[2]["value"].as_number() > 0);

  std::vector<std::string> groups;
  double best_gemm = 0;
  for (const brigade::Json& m : report["results"].items) {
    INFO(m["group"].string + " " + m["name"].string + " " + m["shape"].string + " " + m["dtype"].string);
    bool failed = false;
    for (const auto& member : m.members) failed = failed || member.first == "error";
    CHECK(!failed);
    if (failed) continue;
    groups.push_back(m["group"].string);
    CHECK(m["median_ms"].as_number() > 0);
    CHECK(m["min_ms"].as_number() <= m["median_ms"].as_number());
    CHECK(m["repeats"].as_number() >= 3);
    const double achieved = m["achieved"].as_number();
    CHECK(achieved > 0);
    // Each percentage is of the ceiling its row names, in that ceiling's unit.
    const brigade::Json* ceiling = ceiling_named(ceilings, m["baseline"].string);
    REQUIRE(ceiling != nullptr);
    CHECK(m["unit"].string == (*ceiling)["unit"].string);
    CHECK(m["percent_of_baseline"].as_number() == Approx(100 * achieved / (*ceiling)["value"].as_number()).epsilon(1e-9));
    // The GEMM's fastest repeat, as the FMA peak is its fastest (bench/fma_peak.cpp): on a machine
    // shared with other work, best against best is the comparison noise cannot tilt.
    if (m["group"].string == "gemm") {
      best_gemm = std::max(best_gemm, achieved * m["median_ms"].as_number() / m["min_ms"].as_number());
      // Every GEMM row counts 2 m n k FLOPs for its "MxNxK" shape: checked exactly, so a FLOP
      // miscounted by 2x is caught without comparing two timings.
      long long mm = 0, nn = 0, kk = 0;
      REQUIRE(std::sscanf(m["shape"].string.c_str(), "%lldx%lldx%lld", &mm, &nn, &kk) == 3);
      const double gemm_flops = achieved * 1e9 * m["median_ms"].as_number() / 1e3;
      CHECK(gemm_flops == Approx(2.0 * double(mm) * double(nn) * double(kk)).epsilon(1e-9));
    }
    // Attention's FLOPs as FlashAttention counts them (tools/bench_kernels/attention.cpp): 4 D per
    // visible (query, key) pair forward, 2.5 times that backward. The CPU's quick shape is
    // [1, 4, 128, 64], causal: 4 heads x 128 x 129 / 2 pairs.
    const double attention_flops = 4.0 * 64 * (4.0 * 128 * 129 / 2);
    const double flops = achieved * 1e9 * m["median_ms"].as_number() / 1e3;  // GFLOP/s x seconds
    if (m["name"].string == "attention fused forward") CHECK(flops == Approx(attention_flops).epsilon(1e-9));
    if (m["name"].string == "attention fused backward") CHECK(flops == Approx(2.5 * attention_flops).epsilon(1e-9));
  }
  for (const char* group : {"elementwise", "copy", "random", "reduce", "softmax", "norm", "embedding", "loss",
                            "optimizer", "pool", "gemm", "conv", "attention"}) {
    INFO(group);
    CHECK(std::find(groups.begin(), groups.end(), group) != groups.end());
  }
  // No timing is compared here (timings belong to bench/, and two timings taken at different
  // moments on a shared machine compare the machine's load: the GEMM's best read 201 GFLOP/s against
  // a peak measured at 136, then 3x the peak under a load of 24 on two cores). The GEMM rows' FLOPs
  // are checked exactly above; the rates need only be real numbers.
  CHECK(best_gemm > 0);
  CHECK(std::isfinite(best_gemm));
  CHECK(fma_peak > 0);
  CHECK(std::isfinite(fma_peak));
}

TEST_CASE("bench step: times a GPT step, reports tokens/s and memory, and checks its flags") {
  const test::TempDir dir;
  const std::string path = dir.file("step.json");
  std::ostringstream out, err;
  REQUIRE(brigade::bench_step::bench_step_command({"--layers", "1", "--embd", "16", "--heads", "2", "--seq", "8",
                                                   "--batch", "4", "--steps", "3", "--warmup", "1", "--json", path},
                                                  out, err) == 0);
  INFO(out.str() + err.str());
  const brigade::Json j = brigade::parse_json(brigade::read_file(path, "test"));
  CHECK(j["config"]["layers"].as_number() == 1);
  CHECK(j["config"]["attention"].string == "fused");
  // The machine and the build, as every benchmark's JSON records them (bench::environment_json).
  CHECK(j["device"].string == "cpu");
  CHECK(!j["date"].string.empty());
  CHECK(!j["git_commit"].string.empty());
  CHECK(j["cpu"]["logical_cores"].as_number() >= 1);
  CHECK(j["step_ms"]["steps"].as_number() == 3);
  const double median = j["step_ms"]["median"].as_number();
  CHECK(median > 0);
  CHECK(j["step_ms"]["min"].as_number() <= median);
  CHECK(j["step_ms"]["max"].as_number() >= median);
  // tokens/s is the batch's 32 tokens over the median step.
  CHECK(j["tokens_per_s"].as_number() == Approx(32 / (median / 1e3)).epsilon(1e-9));
  // The weights and AdamW's two moments stay between steps; a step's activations and gradients come on top.
  const double params = j["parameters"].as_number();
  CHECK(j["resident_bytes"].as_number() >= 3 * 4 * params);
  CHECK(j["peak_bytes"].as_number() > j["resident_bytes"].as_number());

  std::ostringstream out2, err2;
  CHECK(brigade::bench_step::bench_step_command({"--embd", "10", "--heads", "4"}, out2, err2) == 2);
  CHECK(err2.str().find("--heads 4 must divide --embd 10") != std::string::npos);
  CHECK(brigade::bench_step::bench_step_command({"--attention", "flash"}, out2, err2) == 2);
  CHECK(err2.str().find("--attention: expected one of fused, composed, got 'flash'") != std::string::npos);
  CHECK(brigade::bench_step::bench_step_command({"--cuda-graph"}, out2, err2) == 2);
  CHECK(err2.str().find("--cuda-graph needs --device cuda") != std::string::npos);
  CHECK(brigade::bench_step::bench_step_command({"--device", "cuda", "--cuda-graph", "--warmup", "0"}, out2, err2) == 2);
  CHECK(err2.str().find("--cuda-graph needs --warmup 1 or more") != std::string::npos);
  CHECK(brigade::bench_step::bench_step_command({"--clip", "-1"}, out2, err2) == 2);
  CHECK(err2.str().find("--clip: expected a number >= 0, got '-1'") != std::string::npos);
  // --device and --precision are read into a Device and a DType (tools/cli): a bad value names the flag and
  // what it takes.
  CHECK(brigade::bench_step::bench_step_command({"--device", "gpu"}, out2, err2) == 2);
  CHECK(err2.str().find("--device: expected cpu or cuda, got 'gpu'") != std::string::npos);
  CHECK(brigade::bench_step::bench_step_command({"--precision", "f16"}, out2, err2) == 2);
  CHECK(err2.str().find("--precision: expected bf16 or f32, got 'f16'") != std::string::npos);
}
