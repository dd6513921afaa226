// What a benchmark run produced, and the two ways it is written out: a table for people (stdout) and
// JSON for files that get committed and compared (bench/results/).
//
// Every number comes with what it should be compared to. A kernel's time alone says little; "1.9
// TB/s, 45% of what a plain device-to-device copy reaches on this GPU" says how much is left on the
// table. So each run first measures the machine's ceilings (copy bandwidth, cuBLAS GEMM throughput),
// and each measurement names the ceiling its percentage is of.
#pragma once

#include <string>
#include <vector>

#include "bench/stats.h"
#include "core/json.h"

namespace brigade::bench {

// The machine and the code that produced a report: without these a number cannot be compared.
// A run measures one device: the GPU fields are empty in a CPU run, the CPU fields in a GPU run.
struct Environment {
  std::string device;               // what was measured: "cpu" or "cuda:0"
  std::string cpu_name;             // "AMD EPYC 7B13" (/proc/cpuinfo)
  int cpu_logical_cores = 0;        // hardware threads the OS offers
  int cpu_threads = 0;              // threads brigade's CPU kernels use (core/parallel.h)
  double cpu_llc_mib = 0;           // the last-level cache, all instances together
  std::string gpu_name;             // "NVIDIA H200"
  std::string compute_capability;   // "9.0"
  int sm_count = 0;
  double memory_gib = 0;
  double l2_mib = 0;
  std::string driver_version;       // the kernel module's version, "570.86.15" (empty when unknown)
  std::string driver_cuda_version;  // the newest CUDA the driver supports, "12.8"
  std::string runtime_version;      // the CUDA runtime brigade runs on, "13.0"
  std::string date;                 // UTC, ISO 8601
  std::string git_commit;           // `git describe --always --dirty` at build time, or $BRIGADE_GIT_COMMIT
};

// A roofline measured on this machine: the best a kernel of its kind can hope for.
struct Ceiling {
  std::string name;  // "device-to-device copy", "cuBLAS bf16 GEMM 4096^3", "FMA peak: AVX2+FMA on 2 threads"
  double value = 0;
  std::string unit;  // "GB/s", "TFLOP/s" (a GPU) or "GFLOP/s" (the CPU)
};

struct Measurement {
  std::string group;   // "memory", "gemm", "conv", ...
  std::string name;    // "add", "matmul tiled"
  std::string shape;   // "4096x4096"
  std::string dtype;   // "bf16"
  Summary time_ms;     // over the repeats
  double achieved = 0;        // in `unit`, computed from the median time
  std::string unit;           // "GB/s", "TFLOP/s" (a GPU) or "GFLOP/s" (the CPU)
  std::string baseline;       // what `percent` is a percentage of; empty: none. In a CPU run it is
                              // the start of a ceiling's name ("copy bandwidth", "FMA peak")
  double percent = -1;        // achieved (or speed) relative to the baseline, in %
  std::string error;          // why the measurement failed (an exception); empty when it ran
};

struct Report {
  Environment env;
  bool quick = false;
  std::vector<Ceiling> ceilings;
  std::vector<Measurement> results;
};

// Column-aligned text, the header underlined with dashes. Numbers read best right-aligned.
struct Column {
  std::string name;
  bool align_right = false;
};
// Every row must have one cell per column (else brigade::Error).
std::string format_table(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& rows);

// A number with `digits` significant digits, without exponent notation for everyday magnitudes:
// 0.0123, 1.23, 1234 (never "1.23e+03").
std::string format_number(double value, int digits = 3);

// The report for people: environment, ceilings, then one table row per measurement.
std::string report_text(const Report& report);

// The report as a JSON document (see bench/results/README.md for the fields).
std::string report_json(const Report& report);
// The fields every benchmark's JSON records about the machine and the build (date, git_commit, device,
// cpu, gpu, driver_version, driver_cuda_version, cuda_runtime_version), one "key": value, line each,
// each line starting with `indent` (bench/results/README.md says what they mean).
std::string environment_json(const Environment& e, const std::string& indent);

// JSON literals are core's (core/json.h), the same in every file brigade writes; the name is
// brought in here because it belongs to the report's vocabulary (and its tests use it so).
using brigade::json_string;

}  // namespace brigade::bench
