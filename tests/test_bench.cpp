// The benchmark harness's CPU-side pieces: statistics, the table and the JSON it writes, the
// environment strings, and `brigade bench kernels` flag parsing and its no-GPU behaviour.
#include <cstdlib>
#include <catch2/catch.hpp>

#include <sstream>

#include "bench/environment.h"
#include "bench_kernels/command.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "core/device.h"
#include "core/error.h"

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
  std::string error;
  SECTION("defaults") {
    auto o = parse_kernels_options({}, error);
    REQUIRE(o);
    CHECK(!o->quick);
    CHECK(o->json_path.empty());
  }
  SECTION("--json FILE, --json=FILE and --quick") {
    auto o = parse_kernels_options({"--quick", "--json", "out.json"}, error);
    REQUIRE(o);
    CHECK(o->quick);
    CHECK(o->json_path == "out.json");
    CHECK(parse_kernels_options({"--json=x.json"}, error)->json_path == "x.json");
  }
  SECTION("errors") {
    CHECK(!parse_kernels_options({"--json"}, error));
    CHECK(error == "--json needs a file name");
    CHECK(!parse_kernels_options({"--json", "--quick"}, error));
    CHECK(!parse_kernels_options({"--fast"}, error));
    CHECK(error == "unknown argument '--fast'");
  }
  SECTION("a bad flag exits 2 with the usage") {
    std::ostringstream out, err;
    CHECK(kernels_command({"--nope"}, out, err) == 2);
    CHECK(err.str().find("unknown argument '--nope'") != std::string::npos);
    CHECK(err.str().find("usage: brigade bench kernels") != std::string::npos);
  }
  SECTION("--help exits 0") {
    std::ostringstream out, err;
    CHECK(kernels_command({"--help"}, out, err) == 0);
    CHECK(out.str().find("--quick") != std::string::npos);
  }
}

TEST_CASE("bench kernels without a GPU says so and exits 0") {
  // On a machine with a GPU this would run the real benchmarks: that belongs to `brigade bench`, not
  // to a unit test.
  if (brigade::cuda_device_count() > 0) return;
  std::ostringstream out, err;
  CHECK(kernels_command({"--quick", "--json", "/nonexistent/dir/never-written.json"}, out, err) == 0);
  CHECK(out.str().find("nothing to measure") != std::string::npos);
}
