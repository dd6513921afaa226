#include "bench_kernels/command.h"

#include "bench/report.h"
#include "bench_kernels/benchmarks.h"
#include "core/atomic_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "tools/cli/command.h"

// The GPU benchmarks need a real GPU: the CPU emulator's timings would mean nothing. (Its CPU kernels
// are the real ones, so the CPU benchmarks run in an emulator build too.)
#include "bench/gpu.h"

namespace brigade::bench {
namespace {

const std::vector<cli::Flag<KernelsOptions>>& flags() {
  static const std::vector<cli::Flag<KernelsOptions>> table = {
      {"--device", "DEV", "cpu or cuda: what to measure",
       [](KernelsOptions& o, const std::string& v) { o.device = cli::parse_device("--device", v, false); },
       [](const KernelsOptions&) { return std::string("cuda where a GPU is present, else cpu"); }},
      {"--json", "FILE", "write the report as JSON to FILE",
       [](KernelsOptions& o, const std::string& v) {
         // "--json --quick" is a forgotten file name, not a file called --quick.
         if (v.empty() || v.rfind("--", 0) == 0) throw cli::UsageError("--json: expected a file name, got '" + v + "'");
         o.json_path = v;
       },
       [](const KernelsOptions&) { return std::string("none"); }},
      {"--quick", "", "fewer sizes and repeats (a smoke run: seconds on the CPU)",
       [](KernelsOptions& o, const std::string&) { o.quick = true; },
       [](const KernelsOptions&) { return std::string("off"); }},
  };
  return table;
}

std::string usage() {
  return "usage: brigade bench kernels [flags]\n"
         "\n"
         "Measures the machine's ceilings, then brigade's kernels against them, and prints a table; --json\n"
         "also writes the results with the machine, date and commit (see bench/results/README.md).\n"
         "\n"
         "On a GPU (the default when there is one): device-to-device copy bandwidth and cuBLAS bf16/f32\n"
         "GEMM at 4096^3 and 8192^3; memory-bound kernels in GB/s and % of the copy bandwidth, the three\n"
         "matmul backends in TFLOP/s and % of cuBLAS, the direct convolution as % of cuDNN, fused attention\n"
         "(forward, backward, and the composition it replaces) as % of cuBLAS at 4096^3.\n"
         "On the CPU (the default without a GPU): the copy bandwidth of memcpy on brigade's threads, the FMA\n"
         "peak (independent AVX2 FMAs on every thread) and brigade's f32 GEMM at 2048^3 for reference;\n"
         "memory-bound kernels in GB/s and % of the copy bandwidth, GEMMs, convolutions and attention in\n"
         "GFLOP/s and % of the FMA peak. Shapes are CPU-sized (a full run takes a minute or two); f32 throughout, bf16\n"
         "for the elementwise rows only (the CPU computes bf16 through f32 copies).\n"
         "\n"
         "flags:\n" +
         cli::flag_lines(flags());
}

#if BRIGADE_BENCH_GPU
void measure_gpu_ceilings(Session& s) {
  s.measure_copy_ceiling();
  for (int64_t n : {4096, 8192}) {
    for (DType t : {DType::bf16, DType::f32}) {
      const std::string size = std::to_string(n);
      s.add_ceiling(std::string("cuBLAS ") + dtype_name(t) + " GEMM " + size + "^3", s.cublas_tflops(t, n, n, n),
                    "TFLOP/s");
    }
  }
  // What ops::set_allow_tf32(true) would buy f32 matmuls (brigade leaves it off: f32 means f32).
  if (!s.quick()) {
    const double tf32 = cublas_gemm(s.device(), DType::f32, 8192, 8192, 8192, true, TimingOptions{}).value;
    s.add_ceiling("cuBLAS f32 GEMM 8192^3 with TF32 (opt-in)", tf32, "TFLOP/s");
  }
}
#endif

void measure_cpu_ceilings(Session& s) {
  s.measure_copy_ceiling();
  s.measure_fma_peak();
  // brigade's own GEMM at a size where packing and threading overheads are small: what the FMA peak
  // means in practice. A reference only: the GEMM rows are compared with the FMA peak.
  const int64_t n = s.quick() ? 1024 : 2048;
  const Tensor a = randn({n, n}, DType::f32, s.device()), b = randn({n, n}, DType::f32, s.device());
  const Summary ms = time_cpu([&] { ops::matmul(a, b); }, s.timing());
  const double gflops = 2.0 * double(n) * double(n) * double(n) / (ms.median * 1e-3) / 1e9;
  s.add_ceiling("brigade f32 GEMM " + std::to_string(n) + "^3 (for reference)", gflops, "GFLOP/s");
}

Report run_all(Device device, bool quick, std::ostream& progress) {
  Session s(device, quick, progress);
  if (device.is_cpu()) {
    measure_cpu_ceilings(s);
  } else {
#if BRIGADE_BENCH_GPU
    measure_gpu_ceilings(s);
#else
    throw Error("bench kernels: this build cannot measure " + device.str());
#endif
  }
  const Sizes sizes = sizes_for(device, quick);
  // A group that throws outside a measurement (while making its inputs) is reported, and the next
  // group still runs.
  const std::pair<const char*, void (*)(Session&, const Sizes&)> groups[] = {
      {"memory", run_memory_benchmarks}, {"gemm", run_gemm_benchmarks}, {"conv", run_conv_benchmarks},
      {"attention", run_attention_benchmarks}};
  for (const auto& [name, run] : groups) {
    try {
      run(s, sizes);
    } catch (const std::exception& e) {
      s.record_failure({name, "(the rest of the group)", "", ""}, e.what());
    }
  }
  return s.report();
}

size_t count_failures(const Report& report) {
  size_t n = 0;
  for (const Measurement& m : report.results) n += !m.error.empty();
  return n;
}

// cuda where this build can measure a real GPU and one is present, else cpu.
Device default_device() {
#if BRIGADE_BENCH_GPU
  if (cuda_device_count() > 0) return Device::cuda(0);
#endif
  return Device::cpu();
}

int measure(const KernelsOptions& options, std::ostream& out, std::ostream& err) {
  const Device device = options.device.value_or(default_device());
  if (device.is_cuda()) {
#if BRIGADE_CUDA_EMULATOR
    out << "brigade bench kernels: this build runs CUDA kernels on the CPU emulator (-Dgpu_emulator=true), "
           "whose timings mean nothing: build with nvcc on a GPU machine (--device cpu measures the CPU).\n";
    return 0;
#endif
    if (cuda_device_count() == 0) {
#if BRIGADE_HAVE_CUDA
      out << "brigade bench kernels: no GPU found (no device or no CUDA driver): nothing to measure with "
             "--device cuda (--device cpu measures the CPU).\n";
#else
      out << "brigade bench kernels: this build has no CUDA backend (configured with -Dcuda=disabled or without "
             "nvcc): nothing to measure with --device cuda (--device cpu measures the CPU).\n";
#endif
      return 0;
    }
  }
  try {
    const Report report = run_all(device, options.quick, err);
    out << "\n" << report_text(report);
    if (!options.json_path.empty()) {
      // A reader (or a committed results file being replaced) never sees half a report; a failure
      // throws and is reported below.
      write_file_atomically(options.json_path, report_json(report), "--json");
      out << "\nwrote " << options.json_path << "\n";
    }
    if (const size_t failed = count_failures(report)) {
      err << "brigade bench kernels: " << failed << " measurement(s) failed (marked FAILED above)\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    err << "brigade bench kernels: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

ParsedKernelsArgs parse_kernels_args(const std::vector<std::string>& args) {
  ParsedKernelsArgs parsed;
  cli::parse_flags(args, flags(), parsed.options, parsed.help);
  return parsed;
}

int kernels_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade bench kernels", out, err, [&] { return parse_kernels_args(args); }, usage,
      [&](const KernelsOptions& o) { return measure(o, out, err); });
}

}  // namespace brigade::bench
